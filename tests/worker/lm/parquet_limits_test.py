#!/usr/bin/env python3
"""Issue 44, items 3 and 13: `spheret-lm prepare` on Parquet files that ask for more memory than
they hold. One zstd-compressed value of 96 MiB (a file of a few KB, the issue's bomb scaled down:
before, prepare decompressed it whole and held it several times over), as a dictionary-encoded
string (the issue's one-row table) and as a plain large_string between two small rows, is refused
from its page header before it is read, naming the file, row group, row and the limit, with prepare's peak RSS well below the value's size; a value
over --max-line-bytes (under the page limit) is refused naming its row; and the null values
skipped are counted, in the summary line and in meta.json.
  parquet_limits_test.py SPHERET_LM   (exit 77: pyarrow not installed, or spheret-lm built
                                       without Parquet)"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs pyarrow into .venv)")
    sys.exit(77)

LM = sys.argv[1]
MIB = 1 << 20
failures = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def prepare(path, out, *extra):
    """(exit status, stderr, peak RSS in bytes) of one prepare, its own child: wait4's rusage."""
    args = [LM, "prepare", "--input", path, "--out", out, "--threads", "2", *extra]
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, stderr, usage.ru_maxrss * 1024


def error_line(stderr):
    lines = [l for l in stderr.splitlines() if l.startswith("spheret-lm: error:")]
    return lines[0] if len(lines) == 1 else stderr[-600:]


# Writes a bomb in a Python of its own: a child forked from a process holding the 96 MiB would
# start with that process's RSS, and its peak (wait4's ru_maxrss) would count it.
WRITE_BOMB = """import sys
import pyarrow as pa
import pyarrow.parquet as pq
path, text_type, dictionary = sys.argv[1], getattr(pa, sys.argv[2])(), sys.argv[3] == "1"
bomb = "a" * (96 << 20)
texts = pa.array([bomb] if dictionary else ["first", bomb, "third"], text_type)
pq.write_table(pa.table({"text": texts}), path, compression="zstd", use_dictionary=dictionary,
               data_page_size=1, write_batch_size=1)
"""


def bombs(tmp, baseline_rss):
    for text_type, dictionary, page in (("string", True, "its dictionary page"),
                                        ("large_string", False, "the page of rows 1 to 1")):
        path = os.path.join(tmp, f"bomb-{text_type}.parquet")
        subprocess.run([sys.executable, "-c", WRITE_BOMB, path, text_type, str(int(dictionary))],
                       check=True, timeout=60)
        size = os.path.getsize(path)
        status, stderr, rss = prepare(path, os.path.join(tmp, "bomb-out"))
        error = error_line(stderr)
        row = 0 if dictionary else 1
        what = f"a {size}-byte {text_type} file holding 96 MiB in one value ({page})"
        check(f"{what}: refused naming the file, row group, row, page and limit ({error})",
              status == 1 and f"{path} row group 0 row {row}: column 'text' holds 1006" in error
              and page in error and "more than its 1 value(s) can hold at the limit of 67108864 "
              "bytes a value (spheret-lm prepare --max-line-bytes)" in error, stderr[-600:])
        check(f"{what}: peak RSS {rss / MIB:.0f} MiB, under {baseline_rss / MIB:.0f} MiB (a small "
              f"file's) + 32 MiB", rss < baseline_rss + 32 * MIB)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.parquet")
        texts = [f"document {i}" for i in range(300)]
        texts[150] = "b" * 5000
        for i in (3, 77, 201):
            texts[i] = None
        pq.write_table(pa.table({"text": texts}), small, row_group_size=100)
        status, stderr, _ = prepare(small, os.path.join(tmp, "probe"))
        if "reads no Parquet" in stderr:
            print("spheret-lm was built without Parquet:", stderr.strip().splitlines()[-1])
            return 77
        out = os.path.join(tmp, "small-out")
        status, stderr, baseline_rss = prepare(small, out)
        meta = json.load(open(os.path.join(out, "meta.json"))) if status == 0 else {}
        check("nulls are counted in the summary", "(3 null Parquet values skipped)" in stderr,
              stderr[-600:])
        check(f"nulls are counted in meta.json ({meta})",
              meta.get("parquet_nulls") == 3 and meta.get("documents") == 297)
        status, stderr, _ = prepare(small, out, "--max-line-bytes", "4096")
        check(f"a value over --max-line-bytes is refused naming its row ({error_line(stderr)})",
              status == 1 and f"{small} row group 1 row 150: a value of 5000 bytes in column "
              "'text', over the limit of 4096 bytes" in stderr, stderr[-600:])
        bombs(tmp, baseline_rss)
    print(f"{len(failures)} failure(s)" + "".join(f"\n  {f}" for f in failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
