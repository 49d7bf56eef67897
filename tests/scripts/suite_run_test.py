#!/usr/bin/env python3
"""suite_run.py marks a run as loaded when other work competes with it, and only then.

Load-robust: the run with a burner beside it needs only 0.2 cores of other work (a busy-looping
sibling gets far more than that even on a machine that ctest keeps busy), and the run without one
sets the limit at the machine's core count, which other work cannot exceed.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).with_name("suite_run.py")


def suite_run(build, max_other, *command):
    return subprocess.run([sys.executable, str(SCRIPT), "--build", str(build),
                           "--max-other-cores", str(max_other), "--", *command],
                          capture_output=True, text=True, timeout=120)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp)
        mark = build / "Testing" / "Temporary" / "LastTest.loaded"
        failures = []

        # Other work beside the command: a busy loop that is not the wrapper's child.
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            run = suite_run(build, 0.2, sys.executable, "-c", "import time; time.sleep(3)")
        finally:
            burner.kill()
            burner.wait()
        print(run.stdout, end="")
        if run.returncode != 0:
            failures.append(f"the wrapped command exited 0 but suite_run returned {run.returncode}")
        if not mark.is_file() or "other work" not in mark.read_text():
            failures.append(f"a busy loop beside the run left no mark at {mark}")

        # The command's own CPU is not other work, and its exit status comes through.
        run = suite_run(build, os.cpu_count(), sys.executable, "-c",
                        "import sys, time\nwhile time.process_time() < 1: pass\nsys.exit(3)")
        print(run.stdout, end="")
        if run.returncode != 3:
            failures.append(f"the wrapped command exited 3 but suite_run returned {run.returncode}")
        if mark.exists():
            failures.append("a run under the limit left the previous run's mark in place")
        own = re.search(r"the suite's own CPU ([0-9.]+) s", run.stdout)
        if not own or float(own.group(1)) < 0.95:
            failures.append("the command's own second of CPU was not counted as its own")

        for failure in failures:
            print("FAIL:", failure)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
