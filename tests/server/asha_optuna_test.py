#!/usr/bin/env python3
"""spheret's ASHA rungs (server/sched/rungs.h, RungBoard) against Optuna's
SuccessiveHalvingPruner (min_early_stopping_rate 0, bootstrap_count 0) on fixed report sequences:
the same reports, in the same order, go through the probe's one RungBoard and through one Optuna
study (a trial asked when it first reports; report then should_prune for each report; a pruned
trial told PRUNED and its later reports dropped). Per trial they must agree on the step at which
it stopped (or that it did not), on the rungs it completed (Optuna's completed_rung_N system
attributes) and on the value it recorded at each.
  asha_optuna_test.py ASHA_PROBE   (exit 77: optuna not installed)"""
import json
import math
import random
import subprocess
import sys
import warnings

try:
    import optuna
    from optuna.trial import TrialState
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs it)")
    sys.exit(77)

probe = sys.argv[1]
NAN = float("nan")
optuna.logging.set_verbosity(optuna.logging.ERROR)
warnings.filterwarnings("ignore", module="optuna")


def case(name, min_iters, eta, minimize, reports):
    return {"name": name, "min_iters": min_iters, "reduction_factor": eta, "minimize": minimize,
            "reports": reports}


def round_robin(order, steps, value):
    """Each step in turn, the trials of `order` report value(trial, step) (asynchronous)."""
    return [[t, s, value(t, s)] for s in steps for t in order]


def one_by_one(order, steps, value):
    """Each trial of `order` reports all its steps before the next starts (sequential)."""
    return [[t, s, value(t, s)] for t in order for s in steps]


def loss(trial, step):
    """9 learning curves: trial i starts at 1 + i/10, and some later overtake better starts."""
    return round(1.0 + 0.1 * trial - 0.04 * (trial % 3) * math.log(step), 6)


def order_cases():
    """The same 9 curves (eta 3, rungs at steps 1, 3, 9) arriving best first, worst first and
    shuffled, each way minimized and maximized (the negated curves)."""
    shuffled = list(range(9))
    random.Random(20260115).shuffle(shuffled)
    steps = range(1, 12)
    cases = []
    for minimize in (True, False):
        sign = 1 if minimize else -1
        value = lambda t, s, sign=sign: sign * loss(t, s)
        best_first = list(range(9))  # trial i's first value ranks i-th
        direction = "min" if minimize else "max"
        cases += [
            case(f"9 trials best first, {direction}", 1, 3, minimize,
                 round_robin(best_first, steps, value)),
            case(f"9 trials worst first, {direction}", 1, 3, minimize,
                 round_robin(best_first[::-1], steps, value)),
            case(f"9 trials shuffled, {direction}", 1, 3, minimize,
                 round_robin(shuffled, steps, value)),
            case(f"9 trials shuffled one by one, {direction}", 1, 3, minimize,
                 one_by_one(shuffled, steps, value)),
        ]
    return cases


def tie_cases():
    """Equal values at a rung, on the cutoff of the best 1/eta and away from it."""
    first = [1.0, 1.0, 2.0, 2.0, 1.0, 2.0, 1.0, 3.0]
    second = [0.5, 0.5, 0.5, 0.7, 0.5, 0.5, 0.5, 0.5]
    value = lambda t, s: first[t] if s == 1 else second[t] if s == 2 else 0.25
    # eta 3: the 6th value (2.0) ties the 2nd best of 6, the last kept; the 5th (2.0) is not
    # the best of 5.
    at_cutoff = [3.0, 1.0, 2.0, 3.0, 2.0, 2.0, 4.0]
    return [
        case("ties eta 2, min", 1, 2, True, round_robin(range(8), [1, 2, 4, 8], value)),
        case("ties eta 2, max", 1, 2, False, round_robin(range(8), [1, 2, 4, 8], value)),
        case("ties at the cutoff eta 3, min", 1, 3, True,
             round_robin(range(7), [1, 3], lambda t, s: at_cutoff[t])),
        case("ties at the cutoff eta 3, max", 1, 3, False,
             round_robin(range(7), [1, 3], lambda t, s: -at_cutoff[t])),
        case("all equal eta 3, min", 1, 3, True,
             round_robin(range(9), [1, 3, 9, 27], lambda t, s: 0.5)),
    ]


def nan_cases():
    """NaN at the first rung, at a later rung, between rungs and before the first rung; the
    trials after them compete only with numbers."""
    reports = [
        [0, 2, NAN],  # the first rung (min_iters 2): stops, records nothing
        [1, 2, 0.5], [2, 2, 0.4], [3, 2, 0.3],
        [1, 4, NAN],  # between rungs: not judged, goes on
        [4, 1, NAN],  # before the first rung: goes on
        [4, 2, 0.2], [3, 6, NAN],  # a later rung (6): stops after completing rung 0
        [1, 6, 0.6], [2, 6, 0.35], [4, 6, 0.1], [5, 2, NAN], [6, 3, 0.45], [6, 6, 0.05],
        [4, 18, 0.01], [6, 18, NAN], [1, 18, 0.3],
    ]
    flipped = [[t, s, -v] for t, s, v in reports]
    return [case("NaN at rungs and between, min", 2, 3, True, reports),
            case("NaN at rungs and between, max", 2, 3, False, flipped)]


def few_trial_cases():
    """Fewer trials than eta at a rung: a trial continues only while it is the best there."""
    steps = [1, 2, 3, 5, 9, 27, 81]
    return [
        case("1 trial eta 3, min", 1, 3, True, one_by_one([0], steps, lambda t, s: 10.0 / s)),
        case("1 trial eta 3, max", 1, 3, False, one_by_one([0], steps, lambda t, s: 1.0 * s)),
        case("2 trials eta 3, better second, min", 1, 3, True,
             round_robin([0, 1], steps, lambda t, s: 2.0 - t + 0.01 * s)),
        case("2 trials eta 3, worse second, min", 1, 3, True,
             round_robin([0, 1], steps, lambda t, s: 1.0 + t)),
        case("2 trials eta 3, worse second, max", 1, 3, False,
             round_robin([0, 1], steps, lambda t, s: 1.0 - t)),
        # The second leads at rung 0 (step 1) and falls behind at rung 1 (step 3).
        case("2 trials eta 3, crossing, max", 1, 3, False,
             round_robin([0, 1], steps, lambda t, s: (4.0 - 0.5 * s) if t == 1 else 3.0)),
    ]


def step_cases():
    """eta 4; reports that pass two or more rung steps at once; steps between rungs."""
    curve = lambda t, s: round((t * 37 % 11) / 10 + 1.0 / (1 + s), 6)
    skip_steps = {0: [1, 5, 20], 1: [3, 100], 2: [1, 2, 4, 8, 16], 3: [40], 4: [2, 9, 33, 64],
                  5: [1, 17], 6: [7, 8, 70]}
    skipping = [[t, s, curve(t, s)] for t, steps in skip_steps.items() for s in steps]
    skipping.sort(key=lambda r: (r[1], r[0]))  # in step order across trials
    between = [0, 1, 3, 4, 5, 7, 10, 17, 19, 53, 55]  # rungs at 2, 6, 18, 54
    return [
        case("eta 4, 10 trials, min", 2, 4, True, round_robin(range(10), [2, 8, 32, 128], curve)),
        case("eta 4, 10 trials, max", 2, 4, False, round_robin(range(10), [2, 8, 32, 128], curve)),
        case("reports skipping rungs eta 2, min", 1, 2, True, skipping),
        case("reports skipping rungs eta 2, max", 1, 2, False, skipping),
        case("steps between rungs eta 3, min", 2, 3, True, round_robin(range(9), between, curve)),
        case("steps between rungs eta 3, max", 2, 3, False,
             one_by_one(range(9), between, curve)),
        case("no step reaches the first rung", 100, 3, True,
             round_robin(range(5), [1, 50, 99], curve)),
    ]


def stress_case(seed, eta, minimize, min_iters):
    """30 trials of 10 reports each, interleaved at random; steps rise by 1 to 5 (so some
    reports pass two rungs); values to 1 decimal (so rungs hold ties), 1 in 40 NaN."""
    rng = random.Random(seed)
    queues = {}
    for trial in range(30):
        step = rng.randint(0, 2)
        queue = []
        for _ in range(10):
            step += rng.randint(1, 5)
            queue.append([trial, step, NAN if rng.random() < 1 / 40 else round(rng.random(), 1)])
        queues[trial] = queue
    reports = []
    while queues:
        trial = rng.choice(sorted(queues))
        reports.append(queues[trial].pop(0))
        if not queues[trial]:
            del queues[trial]
    direction = "min" if minimize else "max"
    return case(f"stress seed {seed} eta {eta} {direction}", min_iters, eta, minimize, reports)


CASES = (order_cases() + tie_cases() + nan_cases() + few_trial_cases() + step_cases() +
         [stress_case(seed, eta, minimize, min_iters)
          for seed, (eta, minimize, min_iters) in enumerate(
              [(2, True, 1), (2, False, 2), (3, True, 1), (3, False, 3), (4, True, 1),
               (4, False, 2)])])


def check_steps_rise(c):
    """Optuna ignores a second report at a step, and judges the value at a trial's largest step
    (last_step): both sides agree only on reports whose steps rise within each trial."""
    last = {}
    for trial, step, _ in c["reports"]:
        assert step > last.get(trial, -1), f"{c['name']}: trial {trial} step {step} not rising"
        last[trial] = step


def to_probe(cases):
    """JSON for the probe: NaN as "nan" and as null, in turn, so that both forms are read."""
    count = 0

    def encode(value):
        nonlocal count
        if not math.isnan(value):
            return value
        count += 1
        return "nan" if count % 2 else None

    return json.dumps([{key: ([[t, s, encode(v)] for t, s, v in c["reports"]]
                              if key == "reports" else c[key]) for key in c if key != "name"}
                       for c in cases])


def optuna_run(c):
    pruner = optuna.pruners.SuccessiveHalvingPruner(
        min_resource=c["min_iters"], reduction_factor=c["reduction_factor"],
        min_early_stopping_rate=0)
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                sampler=optuna.samplers.RandomSampler(seed=0), pruner=pruner,
                                direction="minimize" if c["minimize"] else "maximize")
    live, stopped = {}, {}
    for trial_id, step, value in c["reports"]:
        if trial_id in stopped:
            continue
        if trial_id not in live:
            live[trial_id] = study.ask()
        trial = live[trial_id]
        trial.report(value, step)
        if trial.should_prune():
            stopped[trial_id] = step
            study.tell(trial, state=TrialState.PRUNED)
    for trial_id, trial in live.items():
        if trial_id not in stopped:
            study.tell(trial, 0.0)  # the objective's value plays no part in pruning
    frozen = study.get_trials(deepcopy=False)
    out = {}
    for trial_id, trial in live.items():
        attrs = frozen[trial.number].system_attrs
        keys = [key for key in attrs if key.startswith("completed_rung_")]
        values = [attrs[f"completed_rung_{rung}"] for rung in range(len(keys))]  # 0.. in turn
        out[str(trial_id)] = {"stop_step": stopped.get(trial_id), "rung": len(keys),
                              "values": values}
    return out


for c in CASES:
    check_steps_rise(c)
answer = subprocess.run([probe], input=to_probe(CASES), capture_output=True, text=True)
if answer.returncode != 0:
    print(f"FAIL the probe exited {answer.returncode}: {answer.stderr.strip()}")
    sys.exit(1)
got = json.loads(answer.stdout)
failures = []
if len(got) != len(CASES):
    failures.append(f"the probe answered {len(got)} cases of {len(CASES)}")
n_reports = n_replayed = n_trials = n_stopped = n_rungs = 0
for index, (c, ours) in enumerate(zip(CASES, got)):
    want = optuna_run(c)
    n_reports += len(c["reports"])
    n_replayed += sum(1 for t, s, _ in c["reports"]
                      if want[str(t)]["stop_step"] is None or s <= want[str(t)]["stop_step"])
    n_trials += len(want)
    n_stopped += sum(w["stop_step"] is not None for w in want.values())
    n_rungs += sum(w["rung"] for w in want.values())
    if sorted(ours) != sorted(want):
        failures.append(f"case {index} ({c['name']}): trials spheret {sorted(ours)}, optuna "
                        f"{sorted(want)}")
        continue
    for trial in sorted(want, key=int):
        for key in ("stop_step", "rung", "values"):
            if ours[trial][key] != want[trial][key]:
                failures.append(f"case {index} ({c['name']}) trial {trial} {key}: spheret "
                                f"{ours[trial][key]}, optuna {want[trial][key]}")
# Cases where nothing stops, or everything does, would compare little.
if not 0 < n_stopped < n_trials:
    failures.append(f"{n_stopped} of {n_trials} trials stopped: the cases test too little")
for line in failures:
    print("FAIL", line)
if failures:
    print(f"optuna {optuna.__version__}: {len(failures)} disagreements in {len(CASES)} cases")
    sys.exit(1)
print(f"optuna {optuna.__version__}: {len(CASES)} cases, {n_reports} reports ({n_replayed} "
      f"replayed, the rest after their trial stopped), {n_trials} trials ({n_stopped} stopped, "
      f"{n_rungs} rungs completed): spheret's RungBoard agrees")
