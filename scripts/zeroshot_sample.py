#!/usr/bin/env python3
"""Writes a small stand-in for the eleven zero-shot tasks' data: OUT/<task>/<split>.jsonl in each
dataset's shape (docs/zero-shot.md), its text drawn from the fortunes corpus the CPU twins train on.

  scripts/zeroshot_sample.py OUT [--docs N] [--seed S] [--fortunes DIR]

It is a sample for running the path on two cores (`make paper-cpu`): the questions are fortunes
sentences with shuffled answers, so the scores it gives say nothing about a model's knowledge, only
that the path from a checkpoint to Tables 4-5 works. Score real models on the harness's datasets.
"""
import argparse
import json
import os
import random
import re
import sys

FILES = {
    "arc_easy": "test", "arc_challenge": "test", "boolq": "validation",
    "hellaswag": "validation", "lambada_openai": "test", "openbookqa": "test",
    "piqa": "validation", "sciq": "test", "social_iqa": "validation",
    "winogrande": "validation", "wikitext": "test",
}


def sentences(folder):
    """The fortunes' sentences of 4 to 30 plain ASCII words."""
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or name.endswith((".dat", ".u8")):
            continue
        with open(path, encoding="latin-1") as text:
            for block in text.read().split("\n%\n"):
                for sentence in re.split(r"(?<=[.!?])\s+", " ".join(block.split())):
                    words = sentence.split()
                    if 4 <= len(words) <= 30 and sentence.isascii():
                        found.append(sentence)
    return found


def documents(rng, pool, n):
    """n documents per task, in the shape of the task's dataset. Every continuation a task scores
    (an answer, an ending, the rest of a WinoGrande sentence) stays under 48 bytes, so it fits the
    CPU twins' 64-byte context; the prompts before them may be longer (they are cut from the left).
    """
    pick = lambda: rng.choice(pool)
    short = lambda k=3: " ".join(pick().split()[:k])[:40]
    docs = {task: [] for task in FILES}
    for i in range(n):
        labels = ["A", "B", "C", "D"]
        arc = {"id": f"q{i}", "question": pick().rstrip(".!?") + "?",
               "choices": {"text": [short() for _ in labels], "label": labels},
               "answerKey": rng.choice(labels)}
        docs["arc_easy"].append(arc)
        docs["arc_challenge"].append(dict(arc, id=f"c{i}", answerKey=rng.choice(labels)))
        docs["boolq"].append({"question": pick().rstrip(".!?").lower(), "passage": pick() + " " + pick(),
                              "idx": i, "label": rng.randint(0, 1)})
        docs["hellaswag"].append({
            "ind": i, "activity_label": short(2), "ctx_a": pick(), "ctx_b": short(4), "ctx": "",
            "endings": [short(6) for _ in range(4)], "source_id": "fortunes", "split": "val",
            "split_type": "indomain", "label": str(rng.randint(0, 3))})
        docs["lambada_openai"].append({"text": pick() + " " + pick()})
        docs["openbookqa"].append({
            "id": f"o{i}", "question_stem": pick(),
            "choices": {"text": [short() for _ in labels], "label": labels},
            "answerKey": rng.choice(labels)})
        docs["piqa"].append({"goal": pick(), "sol1": short(6), "sol2": short(6),
                             "label": rng.randint(0, 1)})
        docs["sciq"].append({"question": pick().rstrip(".!?") + "?", "support": pick(),
                             "distractor1": short(2), "distractor2": short(2),
                             "distractor3": short(2), "correct_answer": short(2)})
        docs["social_iqa"].append({"context": pick(), "question": pick().rstrip(".!?") + "?",
                                   "answerA": short(), "answerB": short(), "answerC": short(),
                                   "label": str(rng.randint(1, 3))})
        words = pick().split()
        blank = rng.randrange(max(1, len(words) - 4), len(words))  # a short rest after the blank
        while len(" ".join(words[blank + 1:])) > 40:
            words = words[:-1]
        docs["winogrande"].append({
            "sentence": " ".join(words[:blank] + ["_"] + words[blank + 1:]),
            "option1": words[blank], "option2": short(1), "answer": str(rng.randint(1, 2))})
        docs["wikitext"].append({"page": f" = {short(2)} = \n \n " + " ".join(pick() for _ in range(6))
                                 + " \n"})
    return docs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--docs", type=int, default=40, help="documents per task (default 40)")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--fortunes", default="/usr/share/games/fortunes",
                        help="the fortunes corpus (Debian's fortunes package)")
    args = parser.parse_args()
    if not os.path.isdir(args.fortunes):
        sys.exit(f"zeroshot_sample: no fortunes at {args.fortunes} (apt-get install fortunes)")
    pool = sentences(args.fortunes)
    if len(pool) < 100:
        sys.exit(f"zeroshot_sample: only {len(pool)} usable sentences under {args.fortunes}")
    docs = documents(random.Random(args.seed), pool, args.docs)
    for task, split in FILES.items():
        os.makedirs(os.path.join(args.out, task), exist_ok=True)
        with open(os.path.join(args.out, task, split + ".jsonl"), "w") as out:
            for doc in docs[task]:
                out.write(json.dumps(doc) + "\n")
    print(f"zeroshot_sample: {args.docs} documents for each of {len(FILES)} tasks in {args.out}")


if __name__ == "__main__":
    main()
