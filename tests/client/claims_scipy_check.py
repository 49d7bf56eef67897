#!/usr/bin/env python3
"""`spheret report --claims` against the coordinator's SQLite file and scipy.stats.

Every record of CLAIMS.json (claims.json of `report --claims --out DIR`, or `--format json`) is
recomputed from the database alone: its rows' trials (each row's trials are every trial of its
sweeps whose stored config equals the row's but for the seed; the counted ones are SUCCEEDED with
a value, or SUCCEEDED and DIVERGED for divergences), their values (final val/loss and
train/loss_spikes from `summaries`, steps to reach a loss from the `curves` view, DIVERGED
states), the means, the effect and its 95% t interval (scipy.stats.t), the paired t test over
shared seeds (ttest_rel) or Welch's (ttest_ind, equal_var=False) with t, df and p, Fisher's exact
p (fisher_exact), all to 1e-9; and the verdict by the rule of docs/cli.md ("The claims report").

  claims_scipy_check.py DB CLAIMS.json    exit 0: all agree; 1: a mismatch (each printed);
                                          77: numpy or scipy not installed
"""
import json
import math
import sqlite3
import sys
import warnings

try:
    import numpy as np
    from scipy import stats
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs it)")
    sys.exit(77)

TOLERANCE = 1e-9
ALPHA = 0.05
# The claims that pair rows equal but for these keys (and the seed); the others pair rows at the
# paper's settings, where scalenorm may differ (listed, not disqualifying).
MATCHED = {
    "spheretnorm_vs_geonorm_matched": {"method", "p"},
    "cap_divergences": {"angle_max"},
    "cap_loss_spikes": {"angle_max"},
    "cap_final_loss": {"angle_max"},
    "cap_quarter_vs_half_pi": {"angle_max"},
    "scalenorm_accelerates": {"scalenorm"},
}
UNIVERSAL = {"converges_where_pre_ln_or_keel_diverge"}
IDENTITY = {"method", "p", "seed"}
SPHERETNORM = {"p_spheret", "proj_spheret", "cay_spheret"}

problems = []


def fail(record, what):
    problems.append(f"{record['claim']} {record['column']}: {record['a']} vs {record['b']}: {what}")


def close(x, y):
    """Equal to TOLERANCE (relative or absolute); None (JSON null) stands for NaN or ±inf."""
    x = math.nan if x is None else float(x)
    y = math.nan if y is None else float(y)
    if not math.isfinite(x) or not math.isfinite(y):
        return not math.isfinite(x) and not math.isfinite(y)
    return math.isclose(x, y, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


class Database:
    def __init__(self, path):
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def trial(self, trial_id):
        sweep, state, config = self.db.execute(
            "SELECT sweep_id, state, config_json FROM trials WHERE trial_id = ?",
            (trial_id,)).fetchone()
        return {"id": trial_id, "sweep": sweep, "state": state,
                "config": with_defaults(json.loads(config))}

    def trials_of(self, sweep):
        return [self.trial(row[0]) for row in self.db.execute(
            "SELECT trial_id FROM trials WHERE sweep_id = ? ORDER BY trial_id", (sweep,))]

    def final(self, trial_id, metric):
        row = self.db.execute(
            "SELECT s.last FROM summaries s JOIN metric_names m USING (metric_id) "
            "WHERE s.trial_id = ? AND m.name = ?", (trial_id, metric)).fetchone()
        return math.nan if row is None or row[0] is None else row[0]

    def curve(self, trial_id):
        points = {}
        for step, value in self.db.execute(
                "SELECT step, value FROM curves WHERE trial_id = ? AND metric = 'val/loss' "
                "ORDER BY step, attempt", (trial_id,)):
            points[step] = math.nan if value is None else value  # the newest attempt's
        return sorted(points.items())


def with_defaults(config):
    """The stored config with the two defaults the claims vary spelled out, so that sweeps that
    write them and sweeps that do not compare alike: angle_max π/4 (docs/methods.md), and
    scalenorm on for the SpheretNorm family and off for every other method (§4.2)."""
    config = dict(config)
    config.setdefault("angle_max", math.pi / 4)
    config.setdefault("scalenorm", config.get("method", "pre_ln") in SPHERETNORM)
    return config


def seed_of(trial):
    seed = trial["config"].get("seed", 1337)
    return seed if isinstance(seed, int) else 1337


def without(config, keys):
    return {k: v for k, v in config.items() if k not in keys}


def ids(text):
    return [int(x) for x in text.split()] if text else []


def floats(text):
    return [float(x) for x in text.split()] if text else []


def row_members(db, listed):
    """Every trial of the listed trials' sweeps whose stored config equals theirs but the seed."""
    if not listed:
        return []
    config = without(listed[0]["config"], {"seed"})
    members = []
    for sweep in sorted({t["sweep"] for t in listed}):
        members += [t for t in db.trials_of(sweep) if without(t["config"], {"seed"}) == config]
    return members


def value_of(db, metric, trial, threshold):
    if metric == "diverged":
        return {"DIVERGED": 1.0, "SUCCEEDED": 0.0}.get(trial["state"], math.nan)
    if trial["state"] != "SUCCEEDED":
        return math.nan
    if metric in ("val/loss", "train/loss_spikes"):
        return db.final(trial["id"], metric)
    for step, value in db.curve(trial["id"]):
        if math.isfinite(value) and value <= threshold:
            return float(step)
    return math.nan


def threshold_of(db, members):
    """The loss every SUCCEEDED trial of both rows reaches: the largest of their curves' minima."""
    minima = [min((v for _, v in db.curve(t["id"]) if math.isfinite(v)), default=math.nan)
              for t in members if t["state"] == "SUCCEEDED"]
    minima = [m for m in minima if math.isfinite(m)]
    return max(minima) if minima else math.nan


def check_rows(db, record, metric):
    """The rows' trials and values from the database; returns them and (seeds, values) per row."""
    listed, members = {}, {}
    for side in ("a", "b"):
        listed[side] = [db.trial(i) for i in ids(record[f"trials_{side}"])]
        configs = {json.dumps(without(t["config"], {"seed"}), sort_keys=True)
                   for t in listed[side]}
        if len(configs) > 1:
            fail(record, f"row {side.upper()}'s trials differ in more than the seed")
        members[side] = row_members(db, listed[side])
    threshold = math.nan
    if metric == "steps_to_val_loss":
        threshold = threshold_of(db, members["a"] + members["b"])
        if not close(threshold, record["threshold"]):
            fail(record, f"threshold {record['threshold']} != {threshold}")
    out = {}
    for side in ("a", "b"):
        counted = sorted(t["id"] for t in members[side]
                         if math.isfinite(value_of(db, metric, t, threshold)))
        if counted != sorted(t["id"] for t in listed[side]):
            fail(record, f"row {side.upper()} counts trials {ids(record[f'trials_{side}'])}; "
                         f"the database's row has {counted}")
        values = [value_of(db, metric, t, threshold) for t in listed[side]]
        reported = floats(record[f"values_{side}"])
        if len(values) != len(reported) or not all(map(close, values, reported)):
            fail(record, f"values {side.upper()} {reported} != the database's {values}")
        out[side] = ([seed_of(t) for t in listed[side]], values)
    return out, listed


def t_figures(a, b):
    """CompareOverSeeds as SciPy computes it: (test, mean, low, high, t, df, p)."""
    (seeds_a, xa), (seeds_b, xb) = a, b
    nan = (math.nan,) * 6
    paired = (len(set(seeds_a)) == len(seeds_a) and len(set(seeds_b)) == len(seeds_b)
              and sorted(seeds_a) == sorted(seeds_b) and len(seeds_a) >= 2)
    if paired:
        by_b = dict(zip(seeds_b, xb))
        order = sorted(seeds_a)
        pa = np.array([dict(zip(seeds_a, xa))[s] for s in order])
        pb = np.array([by_b[s] for s in order])
        diffs = pa - pb
        df = len(diffs) - 1
        se = diffs.std(ddof=1) / math.sqrt(len(diffs))
        result = stats.ttest_rel(pa, pb)
        mean = diffs.mean()
        half = stats.t.ppf(0.975, df) * se
        return ("paired t", mean, mean - half, mean + half, result.statistic, df, result.pvalue)
    if len(xa) < 2 or len(xb) < 2:
        return ("needs 2 seeds each",) + nan
    xa, xb = np.array(xa), np.array(xb)
    va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
    if va + vb == 0:  # no spread in either row: Welch's df and p are undefined (0 / 0)
        mean = xa.mean() - xb.mean()
        return ("Welch t", mean, math.nan, math.nan, math.copysign(math.inf, mean)
                if mean else math.nan, math.nan, math.nan)
    df = (va + vb) ** 2 / (va ** 2 / (len(xa) - 1) + vb ** 2 / (len(xb) - 1))
    result = stats.ttest_ind(xa, xb, equal_var=False)
    mean = xa.mean() - xb.mean()
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    return ("Welch t", mean, mean - half, mean + half, result.statistic, df, result.pvalue)


def expected_verdict(record, metric, figures):
    claim = record["claim"]
    allowed = set() if claim in MATCHED else {"scalenorm"}
    keys = [part.split(":")[0].strip() for part in record["confounds"].split(" | ") if part]
    if [k for k in keys if k not in allowed]:
        return "inconclusive"
    a_lower = record["expect"] == "A < B"
    if metric == "diverged":
        n_a, n_b, d_a, d_b, p = figures
        if n_a == 0 or n_b == 0:
            return "inconclusive"
        if claim in UNIVERSAL:
            if d_b == 0:
                return "inconclusive"
            if d_a > 0:
                return "contradicted"
            return "supported" if p < ALPHA else "inconclusive"
        if p >= ALPHA:
            return "inconclusive"
        return "supported" if (d_a / n_a < d_b / n_b) == a_lower else "contradicted"
    n_a, n_b, low, high = figures
    if n_a < 2 or n_b < 2 or not high > low or low <= 0 <= high:
        return "inconclusive"
    return "supported" if (high < 0) == a_lower else "contradicted"


def check_confounds(record, rows):
    """Every key (beyond the claim's own) whose stored value differs between A and B is listed."""
    own = IDENTITY | MATCHED.get(record["claim"], set())
    listed = {part.split(":")[0].strip() for part in record["confounds"].split(" | ") if part}
    for a in rows["a"][:1]:
        for b in rows["b"][:1]:
            for key in (set(a["config"]) | set(b["config"])) - own:
                both = key in a["config"] and key in b["config"]
                if both and a["config"][key] != b["config"][key] and key not in listed:
                    fail(record, f"{key} differs between the rows but is not a listed confound")
            if record["claim"] in MATCHED:
                for key in (set(a["config"]) | set(b["config"])) - own:
                    if a["config"].get(key) != b["config"].get(key):
                        fail(record, f"matched rows differ in {key}")


def check(db, record):
    metric = record["metric"]
    sides, rows = check_rows(db, record, metric)
    check_confounds(record, rows)
    (seeds_a, xa), (seeds_b, xb) = sides["a"], sides["b"]
    if record["n_a"] != len(xa) or record["n_b"] != len(xb):
        fail(record, f"n {record['n_a']}, {record['n_b']} != {len(xa)}, {len(xb)}")
    if metric == "diverged":
        d_a, d_b = int(sum(xa)), int(sum(xb))
        p = stats.fisher_exact([[d_a, len(xa) - d_a], [d_b, len(xb) - d_b]]).pvalue
        rate_a = d_a / len(xa) if xa else math.nan
        rate_b = d_b / len(xb) if xb else math.nan
        for name, value in (("diverged_a", d_a), ("diverged_b", d_b), ("p", p),
                            ("mean_a", rate_a), ("mean_b", rate_b), ("effect", rate_a - rate_b)):
            if not close(record[name], value):
                fail(record, f"{name} {record[name]} != SciPy's {value}")
        verdict = expected_verdict(record, metric, (len(xa), len(xb), d_a, d_b, p))
    else:
        test, mean, low, high, t, df, p = t_figures(sides["a"], sides["b"])
        if record["test"] != test:
            fail(record, f"test {record['test']} != {test}")
        for name, value in (("mean_a", np.mean(xa) if xa else math.nan),
                            ("mean_b", np.mean(xb) if xb else math.nan), ("effect", mean),
                            ("ci95_low", low), ("ci95_high", high), ("t", t), ("df", df),
                            ("p", p)):
            if not close(record[name], value):
                fail(record, f"{name} {record[name]} != SciPy's {value}")
        verdict = expected_verdict(record, metric, (len(xa), len(xb), low, high))
    if record["verdict"] != verdict:
        fail(record, f"verdict {record['verdict']} != {verdict} by the rule")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    db = Database(sys.argv[1])
    with open(sys.argv[2]) as f:
        records = json.load(f)
    warnings.simplefilter("ignore")  # SciPy warns on zero-variance samples; the check compares
    for record in records:
        check(db, record)
    for problem in problems:
        print("MISMATCH", problem)
    verdicts = {}
    for record in records:
        verdicts[record["verdict"]] = verdicts.get(record["verdict"], 0) + 1
    print(f"checked {len(records)} comparisons of {len({r['claim'] for r in records})} claims "
          f"({', '.join(f'{n} {v}' for v, n in sorted(verdicts.items()))}): "
          + (f"{len(problems)} mismatch(es)" if problems else
             "every figure equals SciPy's to 1e-9 and every verdict follows the rule"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
