#!/usr/bin/env python3
"""spheret's statistics over seeds (client/report/stats.h) against scipy.stats on fixed data, to
1e-9: the mean's 95% Student t interval (t.interval), the paired t test (ttest_rel) and Welch's
(ttest_ind, equal_var=False) with their 95% intervals and two-sided p-values, and the choice
between them by seeds (paired only when both cells hold the same seeds).
  stats_scipy_test.py STATS_PROBE   (exit 77: scipy not installed)"""
import json
import math
import subprocess
import sys

try:
    import numpy as np
    import scipy
    from scipy import stats
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs it)")
    sys.exit(77)

probe = sys.argv[1]

# Losses of a few seeds as the tables hold them, small and large spreads, n = 2 to 8, a
# difference whose interval includes 0 and ones that do not, unequal sizes and variances.
A3 = [3.0712, 3.0655, 3.0801]
B3 = [3.0921, 3.0874, 3.1012]
CASES = [
    {"kind": "describe", "a": A3},
    {"kind": "describe", "a": [2.0, 4.0, 6.5]},
    {"kind": "describe", "a": [7.645, 3.091]},
    {"kind": "describe", "a": [-1.5, 0.25, 3.75, 10.0, -4.125, 2.5, 0.0, 1e-3]},
    {"kind": "describe", "a": [61.23, 58.97, 60.01, 59.44, 62.8]},
    {"kind": "paired", "a": A3, "b": B3},
    {"kind": "paired", "a": [1.0, 2.0, 3.5], "b": [0.5, 2.5, 2.0]},
    {"kind": "paired", "a": [2.9, 3.1], "b": [3.0, 3.05]},
    {"kind": "paired", "a": [10.5, 11.25, 9.75, 10.0, 12.5, 11.0],
     "b": [10.0, 10.5, 10.25, 9.5, 11.75, 10.0]},
    {"kind": "welch", "a": A3, "b": B3},
    {"kind": "welch", "a": [1.0, 2.0, 3.5, 4.0], "b": [0.5, 2.5, 2.0]},
    {"kind": "welch", "a": [3.05, 3.07, 3.06, 3.08, 3.04], "b": [3.2, 2.9]},
    {"kind": "welch", "a": [55.1, 57.3, 54.8], "b": [50.2, 49.9, 51.4, 50.0]},
    # Same seeds in another order: paired, matched by seed.
    {"kind": "seeds", "a": [3.0712, 3.0655, 3.0801], "seeds_a": [1337, 1338, 1339],
     "b": [3.1012, 3.0921, 3.0874], "seeds_b": [1339, 1337, 1338]},
    # Different seeds: Welch.
    {"kind": "seeds", "a": [3.0712, 3.0655, 3.0801], "seeds_a": [1337, 1338, 1339],
     "b": [3.0921, 3.0874], "seeds_b": [1337, 1340]},
]


def expected(case):
    a = np.array(case["a"])
    if case["kind"] == "describe":
        low, high = stats.t.interval(0.95, len(a) - 1, loc=a.mean(), scale=stats.sem(a))
        return {"n": len(a), "mean": a.mean(), "std": a.std(ddof=1), "ci_low": low,
                "ci_high": high}
    b = np.array(case["b"])
    paired = case["kind"] == "paired"
    if case["kind"] == "seeds":
        paired = sorted(case["seeds_a"]) == sorted(case["seeds_b"])
        if paired:
            order = {s: i for i, s in enumerate(case["seeds_b"])}
            b = np.array([case["b"][order[s]] for s in case["seeds_a"]])
    result = stats.ttest_rel(a, b) if paired else stats.ttest_ind(a, b, equal_var=False)
    ci = result.confidence_interval(0.95)
    mean = (a - b).mean() if paired else a.mean() - b.mean()
    return {"paired": paired, "mean": mean, "ci_low": ci.low, "ci_high": ci.high,
            "t": result.statistic, "df": result.df, "p": result.pvalue,
            "includes_zero": bool(ci.low <= 0 <= ci.high)}


got = json.loads(subprocess.run([probe], input=json.dumps(CASES), capture_output=True, text=True,
                                check=True).stdout)
failures = []
checked = 0
for index, (case, ours) in enumerate(zip(CASES, got)):
    for key, want in expected(case).items():
        have = ours[key]
        checked += 1
        if isinstance(want, (bool, np.bool_)) or isinstance(want, int):
            ok = have == want
        else:
            ok = have is not None and abs(have - float(want)) <= 1e-9 * max(1.0, abs(float(want)))
        if not ok:
            failures.append(f"case {index} ({case['kind']}) {key}: spheret {have}, scipy {want}")
if len(got) != len(CASES):
    failures.append(f"the probe answered {len(got)} cases of {len(CASES)}")
marked = [ours["includes_zero"] for ours in got if "includes_zero" in ours]
if not (any(marked) and not all(marked)):
    failures.append("the cases should hold intervals that include 0 and ones that do not")
print(f"scipy {scipy.__version__}: {checked} figures of {len(CASES)} cases compared")
for line in failures:
    print("FAIL", line)
sys.exit(1 if failures else 0)
