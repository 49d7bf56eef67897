#!/usr/bin/env python3
"""Zero-shot task data from Parquet (`eval --data DIR` reading <task>/<split>.parquet) against the
same documents as JSONL: for the eleven tasks in their datasets' shapes (scripts/zeroshot_sample.py:
nested structs and lists such as ARC's `choices`, ints, strings with Unicode), written by pyarrow
in several row groups, snappy and zstd, `spheret-lm eval --dump-requests` writes the same requests
with the same answers and the same metrics. Then the refusals: a task with both a .jsonl and a
.parquet, a row whose field is null (file, row group, row and field named), a column with no JSON
form (its type named).
  parquet_eval_test.py SPHERET_LM   (exit 77: pyarrow not installed, or spheret-lm built without
                                     Parquet)"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs pyarrow into .venv)")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))
import zeroshot_sample  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from parquet_prepare_test import built_without_parquet  # noqa: E402

LM = sys.argv[1]
failures = []


def lm(*args):
    return subprocess.run([LM, *args], capture_output=True, text=True, timeout=300)


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def sentence_pool(rng):
    words = ("the cat sat on a warm mat while rain fell over old stone roofs Café naïve Straße "
             "東京 🙂 e\u0301 don't").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 14))) + "."
            for _ in range(300)]


def write_task_data(tmp):
    """The same documents as <task>/<split>.jsonl and as <task>/<split>.parquet."""
    docs = zeroshot_sample.documents(random.Random(5), sentence_pool(random.Random(6)), 9)
    jsonl_dir, parquet_dir = os.path.join(tmp, "zs-jsonl"), os.path.join(tmp, "zs-parquet")
    for k, (task, split) in enumerate(zeroshot_sample.FILES.items()):
        for folder in (jsonl_dir, parquet_dir):
            os.makedirs(os.path.join(folder, task))
        with open(os.path.join(jsonl_dir, task, split + ".jsonl"), "w", encoding="utf-8") as out:
            for doc in docs[task]:
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        pq.write_table(pa.Table.from_pylist(docs[task]),
                       os.path.join(parquet_dir, task, split + ".parquet"), row_group_size=4,
                       compression="zstd" if k % 2 else "snappy")
    return jsonl_dir, parquet_dir


def evaluate(run, data, dump):
    result = lm("eval", "--run", run, "--tasks", ",".join(zeroshot_sample.FILES), "--data", data,
                "--dump-requests", dump)
    metrics = [json.loads(l) for l in result.stdout.splitlines() if '"eval"' in l]
    return result, metrics


def expect_error(what, run, task, data, *needles):
    result = lm("eval", "--run", run, "--tasks", task, "--data", data)
    errors = [l for l in result.stderr.splitlines() if l.startswith("spheret-lm: error:")]
    ok = result.returncode == 1 and len(errors) == 1 and all(n in errors[0] for n in needles)
    check(f"{what} refused: {errors[:1]}", ok, result.stderr[-800:])


def refusals(tmp, run, jsonl_dir, parquet_dir):
    both = os.path.join(tmp, "zs-both")
    shutil.copytree(parquet_dir, both)
    shutil.copy(os.path.join(jsonl_dir, "piqa", "validation.jsonl"), os.path.join(both, "piqa"))
    expect_error("a task with both files", run, "piqa", both, "piqa has two data files",
                 "validation.jsonl", "validation.parquet", "keep one")
    rows = pq.read_table(os.path.join(parquet_dir, "piqa", "validation.parquet")).to_pylist()
    rows[6]["sol2"] = None
    bad = os.path.join(tmp, "zs-null")
    os.makedirs(os.path.join(bad, "piqa"))
    path = os.path.join(bad, "piqa", "validation.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    expect_error("a null field", run, "piqa", bad, path + " row group 1 row 6: ", "sol2",
                 "piqa reads")
    table = pq.read_table(os.path.join(parquet_dir, "lambada_openai", "test.parquet"))
    table = table.append_column("raw", pa.array([b"\x00"] * table.num_rows, pa.binary()))
    os.makedirs(os.path.join(tmp, "zs-binary", "lambada_openai"))
    path = os.path.join(tmp, "zs-binary", "lambada_openai", "test.parquet")
    pq.write_table(table, path)
    expect_error("a binary column", run, "lambada_openai", os.path.join(tmp, "zs-binary"), path,
                 "column 'raw' is binary, which has no JSON form")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as out:
            out.write("the cat sat on the mat and the dog ran in the park\n" * 200)
        data, run = os.path.join(tmp, "bytes"), os.path.join(tmp, "run")
        check("prepare", lm("prepare", "--input", corpus, "--out", data).returncode == 0)
        tiny = [f"dataset={data}", "n_layer=1", "n_head=2", "n_embd=16", "block_size=128",
                "batch_size=2", "gradient_accumulation_steps=1", "max_iters=2", "eval_interval=2",
                "eval_iters=1", "warmup_iters=1", "lr_decay_iters=2"]
        result = lm("train", "--out", run, *[a for kv in tiny for a in ("--set", kv)])
        check("a tiny run trains", result.returncode == 0, result.stderr[-800:])
        jsonl_dir, parquet_dir = write_task_data(tmp)
        probe = lm("eval", "--run", run, "--tasks", "piqa", "--data", parquet_dir)
        if "reads no Parquet" in probe.stderr:
            return built_without_parquet(probe.stderr)
        dumps = [os.path.join(tmp, f"requests-{k}.jsonl") for k in ("jsonl", "parquet")]
        (from_jsonl, jsonl_metrics), (from_parquet, parquet_metrics) = (
            evaluate(run, jsonl_dir, dumps[0]), evaluate(run, parquet_dir, dumps[1]))
        check("eval on JSONL", from_jsonl.returncode == 0, from_jsonl.stderr[-800:])
        check("eval on Parquet", from_parquet.returncode == 0, from_parquet.stderr[-800:])
        requests = [open(d, encoding="utf-8").read() for d in dumps if os.path.exists(d)]
        count = requests[0].count("\n") if requests else 0
        check(f"the same {count} requests and answers from Parquet as from JSONL",
              len(requests) == 2 and count > 0 and requests[0] == requests[1])
        check(f"the same {len(jsonl_metrics)} metrics (values and standard errors)",
              len(jsonl_metrics) > 11 and jsonl_metrics == parquet_metrics)
        refusals(tmp, run, jsonl_dir, parquet_dir)
    print(f"{len(failures)} failure(s)" + "".join(f"\n  {f}" for f in failures))
    return 1 if failures else 0


sys.exit(main())
