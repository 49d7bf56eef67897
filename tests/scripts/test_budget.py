#!/usr/bin/env python3
"""The default suite's time budget (issue 45, docs/testing.md).

Reads the tests ctest knows (`ctest --show-only=json-v1`: names, labels, TIMEOUT) and the times of
a finished run (ctest's Testing/Temporary/LastTest.log), and fails when
  - a test of the default suite (not labelled `slow`) took longer than --limit seconds (60), or
  - a test's timeout (its TIMEOUT, else ctest's --timeout that `make test` passes: --default-timeout)
    is less than 5x the time it took,
naming each test with its time and what to do. It also fails when it runs under ctest without
OMP_NUM_THREADS=1 (the pin of the top-level CMakeLists.txt is gone).

  test_budget.py --build BUILD_DIR [--log FILE] [--limit 60] [--report-only]

Under ctest (test `suite_budget`) the log is the previous run's: ctest writes the current one to
LastTest.log.tmp and renames it at the end (and a `ctest -N` rewrites it: this script never runs
ctest on the build folder itself, see known_tests). With no previous log, or when the previous run
had other work beside it (`make test-loaded`, or a busy machine: tests/scripts/suite_run.py, which
the Makefile's test goals run ctest through, leaves Testing/Temporary/LastTest.loaded), its times
are not idle times: the check says so and skips (exit 77). --report-only prints the slowest tests and never fails
(`make test` runs it on the log it has just written).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77
TIMEOUT_FACTOR = 5


def known_tests(build):
    """{name: (labels, timeout or None)} from ctest's own listing.

    ctest, even with --show-only, rewrites Testing/Temporary/LastTest.log* of the folder it reads:
    run inside a ctest run it would end that run's log (and with it the times this checks). So it
    reads a copy of the build's CTestTestfile.cmake tree (their includes are absolute paths into
    the build), in a scratch folder of its own."""
    with tempfile.TemporaryDirectory() as scratch:
        for folder, subfolders, files in os.walk(build):
            subfolders[:] = [d for d in subfolders if d not in ("CMakeFiles", "Testing")]
            if "CTestTestfile.cmake" in files:
                target = Path(scratch) / Path(folder).relative_to(build)
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(folder) / "CTestTestfile.cmake", target)
        out = subprocess.run(["ctest", "--test-dir", scratch, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    tests = {}
    for test in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels = props.get("LABELS", [])
        tests[test["name"]] = (labels if isinstance(labels, list) else [labels],
                               props.get("TIMEOUT"))
    return tests


def run_times(log):
    """{name: seconds} of the tests that ran to an end in a LastTest.log."""
    times, current = {}, None
    for line in log.read_text(errors="replace").splitlines():
        started = re.match(r"^\d+/\d+ Test: (.+)$", line)
        if started:
            current = started.group(1)
            continue
        took = re.match(r"^Test time =\s*([0-9.]+) sec$", line)
        if took and current is not None:
            times[current] = float(took.group(1))
            current = None
    return times


def problems(tests, times, limit, default_timeout):
    found = []
    for name, seconds in sorted(times.items(), key=lambda item: -item[1]):
        if name not in tests:
            continue  # renamed or removed since that run
        labels, timeout = tests[name]
        if "slow" not in labels and seconds > limit:
            found.append(f"{name}: {seconds:.1f} s in the default suite (limit {limit:.0f} s): "
                         "make it faster or label its exhaustive version `slow` "
                         "(docs/testing.md)")
        effective = float(timeout) if timeout is not None else default_timeout
        if effective < TIMEOUT_FACTOR * seconds:
            found.append(f"{name}: timeout {effective:.0f} s is under {TIMEOUT_FACTOR}x its "
                         f"{seconds:.1f} s: raise its TIMEOUT to at least "
                         f"{TIMEOUT_FACTOR * seconds:.0f} s")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, type=Path)
    parser.add_argument("--log", type=Path, help="default: BUILD/Testing/Temporary/LastTest.log")
    parser.add_argument("--limit", type=float, default=60.0)
    parser.add_argument("--default-timeout", type=float, default=900.0)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    temporary = args.build / "Testing" / "Temporary"
    log = args.log or temporary / "LastTest.log"

    if os.environ.get("SPHERET_UNDER_CTEST"):
        if os.environ.get("OMP_NUM_THREADS") != "1":
            print(f"OMP_NUM_THREADS is {os.environ.get('OMP_NUM_THREADS')!r} under ctest, not 1: "
                  "the pin in the top-level CMakeLists.txt (spheret_test_threads.cmake) is gone")
            return 1
    if not log.is_file():
        print(f"no finished run to read ({log} does not exist): nothing to check yet")
        return 0 if args.report_only else SKIP
    loaded = temporary / "LastTest.loaded"
    if loaded.exists() and not args.report_only:
        why = loaded.read_text().strip() or "make test-loaded"
        print(f"{log} is from a run with other work beside it ({why}): its times are not idle "
              "times; skipped")
        return SKIP

    times = run_times(log)  # before anything runs ctest
    if not times:
        print(f"{log} holds no test times (a `ctest -N` since the last run rewrites it): "
              "nothing to check")
        return 0 if args.report_only else SKIP
    tests = known_tests(args.build)
    default = [n for n in times if n in tests and "slow" not in tests[n][0]]
    total = sum(times[n] for n in default)
    print(f"{log}: {len(times)} tests timed, {len(default)} of the default suite "
          f"summing {total:.0f} s; the slowest:")
    for name in sorted(times, key=lambda n: -times[n])[:10]:
        labels = ",".join(tests.get(name, ([], None))[0])
        print(f"  {times[name]:7.1f} s  {name}  [{labels}]")
    found = problems(tests, times, args.limit, args.default_timeout)
    for line in found:
        print(("note: " if args.report_only else "FAIL: ") + line)
    if found and not args.report_only:
        return 1
    print("every default test within %.0f s and every timeout at least %dx the test's time"
          % (args.limit, TIMEOUT_FACTOR) if not found else "(report only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
