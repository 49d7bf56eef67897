#!/usr/bin/env python3
"""Runs a ctest command and records whether the machine was busy with other work meanwhile.

  suite_run.py --build BUILD_DIR [--max-other-cores 0.5] -- ctest ARGS...

`suite_budget` (tests/scripts/test_budget.py) judges the next run by this run's times, which are
idle times only when nothing else competed for the CPU. This wrapper measures the CPU that the
whole machine spent during the run (/proc/stat) and the CPU of the ctest command and everything it
started (getrusage of the reaped children); the difference, over the run's wall time, is the other
work's average number of busy cores. Above --max-other-cores it writes
BUILD_DIR/Testing/Temporary/LastTest.loaded, saying so, and suite_budget skips its time rules on
this run's log; otherwise it removes the mark. It exits with ctest's status.
"""
import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def busy_cpu_seconds():
    """CPU seconds every core has spent on anything but idling since boot (/proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, type=Path)
    parser.add_argument("--max-other-cores", type=float, default=0.5)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")

    busy0, own0, start = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
    status = subprocess.call(command)
    wall = time.monotonic() - start
    own = children_cpu_seconds() - own0
    other = max(0.0, busy_cpu_seconds() - busy0 - own)
    other_cores = other / wall if wall > 0 else 0.0

    mark = args.build / "Testing" / "Temporary" / "LastTest.loaded"
    summary = (f"the suite's own CPU {own:.1f} s; other work on this machine {other:.1f} s "
               f"of CPU in {wall:.0f} s of wall time ({other_cores:.2f} cores on average)")
    if other_cores > args.max_other_cores:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text(summary + "\n")
        print(f"suite_run: {summary}: above {args.max_other_cores} cores, so this run's times are "
              f"loaded times and suite_budget skips them next run ({mark})")
    else:
        mark.unlink(missing_ok=True)
        print(f"suite_run: {summary}")
    return status


if __name__ == "__main__":
    sys.exit(main())
