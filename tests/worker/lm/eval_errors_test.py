#!/usr/bin/env python3
"""Bad input to `spheret-lm eval` / `score`: each is one clear line on stderr and exit 1, naming
what is wrong; and a training run whose zero-shot eval fails still ends done (exit 0) with its
training results, the failure an eval event with metric "error".
  eval_errors_test.py SPHERET_LM"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile

LM = sys.argv[1]
failures = []


def lm(*args):
    return subprocess.run([LM, *args], capture_output=True, text=True, timeout=300)


def expect_error(what, args, *needles):
    result = lm(*args)
    errors = [l for l in result.stderr.splitlines() if l.startswith("spheret-lm: error:")]
    ok = result.returncode == 1 and len(errors) == 1 and all(n in errors[0] for n in needles)
    print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {result.returncode}: {errors[:1]}")
    if not ok:
        failures.append(f"{what}: exit {result.returncode}, stderr:\n{result.stderr[-1500:]}")


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    write(corpus, ["the cat sat on the mat and the dog ran in the park"] * 200)
    data = os.path.join(tmp, "bytes")
    assert lm("prepare", "--input", corpus, "--out", data).returncode == 0
    tiny = ["--set", f"dataset={data}", "--set", "n_layer=1", "--set", "n_head=2", "--set",
            "n_embd=16", "--set", "block_size=32", "--set", "batch_size=2", "--set",
            "gradient_accumulation_steps=1", "--set", "max_iters=4", "--set", "eval_interval=2",
            "--set", "eval_iters=1", "--set", "warmup_iters=1", "--set", "lr_decay_iters=4",
            "--data-root", tmp]  # eval_data lies under it
    run = os.path.join(tmp, "run")
    assert lm("train", "--out", run, *tiny).returncode == 0
    zs = os.path.join(tmp, "zs")
    good = json.dumps({"text": "a b c d"})
    write(os.path.join(zs, "lambada_openai", "test.jsonl"), [good, "{not json", good])
    write(os.path.join(zs, "piqa", "validation.jsonl"),
          [json.dumps({"goal": "g", "sol1": "a", "label": 0})])
    expect_error("malformed JSONL line", ["eval", "--run", run, "--tasks", "lambada_openai",
                                          "--data", zs], "lambada_openai/test.jsonl line 2",
                 "not valid JSON at byte 3")
    expect_error("missing field", ["eval", "--run", run, "--tasks", "piqa", "--data", zs],
                 "piqa/validation.jsonl line 1", "missing field 'sol2'")
    expect_error("unknown task", ["eval", "--run", run, "--tasks", "piqa,hellaswagg", "--data",
                                  zs], "unknown task 'hellaswagg'", "known: arc_easy")
    expect_error("missing task folder", ["eval", "--run", run, "--tasks", "sciq", "--data", zs],
                 "no data for task sciq", "sciq/test.jsonl", "correct_answer")
    # Issue 44, item 10: a task folder or eval_data outside --data-root (as a submitter could name
    # one through `spheret eval --data` or a sweep's eval: data) is refused, naming path and root.
    for outside in ("/etc", os.path.join(tmp, "..", "..", "..", "..", "etc")):
        expect_error(f"--data {outside} outside --data-root",
                     ["eval", "--run", run, "--tasks", "piqa", "--data", outside, "--data-root",
                      zs], f"--data {outside} is outside --data-root {zs}")
    expect_error("eval_data outside --data-root",
                 ["train", "--out", os.path.join(tmp, "run-outside"), *tiny, "--set",
                  "eval_tasks=piqa", "--set", "eval_data=../../../../etc"],
                 f"config key 'eval_data' ../../../../etc is outside --data-root {tmp}")
    requests = os.path.join(tmp, "requests.jsonl")
    write(requests, [json.dumps({"request_type": "loglikelihood", "arguments": ["a"]})])
    expect_error("malformed request", ["score", "--run", run, "--requests", requests],
                 "requests.jsonl line 1", "list of 2 strings")
    # A data set without its tokenizer (meta.json gone): the run cannot turn text into tokens.
    write(os.path.join(tmp, "zs-ok", "lambada_openai", "test.jsonl"), [good] * 3)
    expect_error("wrong step", ["eval", "--run", run, "--tasks", "lambada_openai", "--data",
                                os.path.join(tmp, "zs-ok"), "--step", "3"], "--step 3",
                 "is step 4")
    # A run on token ids with no tokenizer (nanoGPT's GPT-2 ids, no meta.json).
    ids = os.path.join(tmp, "ids")
    os.makedirs(ids)
    for name in ("train.bin", "val.bin"):
        with open(os.path.join(ids, name), "wb") as out:
            rng = random.Random(name)  # uint16 GPT-2 ids, as nanoGPT's prepare.py writes them
            out.write(b"".join(rng.randrange(50257).to_bytes(2, "little") for _ in range(4096)))
    no_tokenizer = os.path.join(tmp, "run-ids")
    tiny_ids = [a if not a.startswith("dataset=") else f"dataset={ids}" for a in tiny]
    assert lm("train", "--out", no_tokenizer, *tiny_ids).returncode == 0
    expect_error("checkpoint without a tokenizer", ["eval", "--run", no_tokenizer, "--tasks",
                                                    "lambada_openai", "--data",
                                                    os.path.join(tmp, "zs-ok")], "no tokenizer",
                 "without a meta.json")

    # A run that asks for an eval it cannot do: trained, done, the failure recorded.
    run2 = os.path.join(tmp, "run2")
    result = lm("train", "--out", run2, *tiny, "--set", "eval_tasks=piqa", "--set",
                f"eval_data={zs}")
    events = [json.loads(l) for l in result.stdout.splitlines()]
    done = [e for e in events if e["type"] == "done"]
    failed = [e for e in events if e["type"] == "eval" and e["metric"] == "error"]
    ok = (result.returncode == 0 and len(done) == 1 and len(failed) == 1 and
          "missing field 'sol2'" in failed[0]["error"] and os.path.exists(os.path.join(run2, "ckpt.pt")))
    print(f"{'ok  ' if ok else 'FAIL'} failed eval keeps the training: exit {result.returncode}, "
          f"done {len(done)}, eval error {failed[:1]}")
    if not ok:
        failures.append("failed eval: " + result.stderr[-1500:])
    # The same run asking for a good eval: eval events after done.
    result = lm("train", "--out", os.path.join(tmp, "run3"), *tiny, "--set",
                "eval_tasks=lambada_openai", "--set", f"eval_data={os.path.join(tmp, 'zs-ok')}")
    evals = [json.loads(l) for l in result.stdout.splitlines() if '"eval"' in l]
    ok = result.returncode == 0 and {e["metric"] for e in evals} == {"perplexity", "acc"}
    print(f"{'ok  ' if ok else 'FAIL'} training with eval_tasks: {evals}")
    if not ok:
        failures.append("train with eval: " + result.stderr[-1500:])

    # SIGTERM during the final eval: exit 4 (stopped) after done; --resume evaluates again.
    big = os.path.join(tmp, "zs-big")
    write(os.path.join(big, "lambada_openai", "test.jsonl"),
          [json.dumps({"text": f"line {i} " + "the cat sat on the mat " * 12}) for i in range(6000)])
    run4 = os.path.join(tmp, "run4")
    args = ["train", "--out", run4, *tiny, "--set", "eval_tasks=lambada_openai", "--set",
            f"eval_data={big}"]
    with subprocess.Popen([LM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        for line in proc.stderr:
            if "spheret-lm: eval of step" in line:
                proc.send_signal(signal.SIGTERM)
                break
        out, _ = proc.communicate(timeout=120)
    types = [json.loads(l)["type"] for l in out.splitlines()]
    # The 6000 documents only keep the eval running until the signal lands, whatever the machine's
    # pace; the resumed eval reads the file again, so 3 of them are enough to show it evaluates.
    write(os.path.join(big, "lambada_openai", "test.jsonl"),
          [json.dumps({"text": f"line {i} " + "the cat sat on the mat " * 12}) for i in range(3)])
    resumed = lm(*args, "--resume")
    evals = [json.loads(l) for l in resumed.stdout.splitlines() if '"eval"' in l]
    ok = (proc.returncode == 4 and types[-2:] == ["done", "stopped"] and "eval" not in types and
          resumed.returncode == 0 and {e["metric"] for e in evals} == {"perplexity", "acc"})
    print(f"{'ok  ' if ok else 'FAIL'} SIGTERM during the eval: exit {proc.returncode}, last "
          f"events {types[-2:]}; --resume: exit {resumed.returncode}, {len(evals)} eval events")
    if not ok:
        failures.append("stop during eval: " + resumed.stderr[-1500:])

print("eval errors:", "FAILED" if failures else "passed")
for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
