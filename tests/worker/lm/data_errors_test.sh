#!/usr/bin/env bash
# spheret-lm on damaged and hostile data sets (issue 28, items 3, 4 and 12): every failure is one
# error event naming the file (and line or token) and exit status 1, never a signal; a failed
# prepare leaves the earlier data set whole; check-data gives a verdict.
# Usage: data_errors_test.sh <path to spheret-lm>
set -euo pipefail
lm=$1
source "$(dirname "$0")/common.sh"
train_args=(train --data-root "$dir/data" --set dataset=tiny --set scale=xs --set block_size=32
  --set batch_size=4 --set gradient_accumulation_steps=1 --set warmup_iters=2 --set eval_iters=1)

# Runs spheret-lm with "$@" (stdout to $dir/out.jsonl, stderr to $dir/err.log); sets $rc.
run() { set +e; "$lm" "$@" > "$dir/out.jsonl" 2> "$dir/err.log"; rc=$?; set -e; }
# Exit status 1 and exactly one event, an error whose message contains each argument.
expect_error() {
  [ "$rc" = 1 ] || fail "exited $rc, want 1 (over 128: killed by a signal): $(tail -3 "$dir/err.log")"
  python3 - "$dir/out.jsonl" "$@" <<'PY' || fail "events: $(head -c 2000 "$dir/out.jsonl")"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
errors = [e for e in events if e["type"] == "error"]
assert len(errors) == 1, f"{len(errors)} error events"
for part in sys.argv[2:]:
    assert part in errors[0]["message"], (part, errors[0]["message"])
PY
}

"$lm" prepare --input "$dir/text" --out "$dir/data/tiny" > /dev/null 2>&1 || fail "prepare failed"
run check-data --data "$dir/data/tiny"
[ "$rc" = 0 ] || fail "check-data of a good data set exited $rc: $(cat "$dir/err.log")"
grep -q "ok: vocab_size 256" "$dir/out.jsonl" || fail "check-data verdict: $(cat "$dir/out.jsonl")"
cp -r "$dir/data/tiny" "$dir/good"

# Item 3: token ids above the vocabulary (byte level: 256), from token 1000 on (so that batches
# draw them: the trainer died of SIGABRT without an error event), named with file and id at open.
python3 -c '
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[2000:] = (300).to_bytes(2, "little") * (len(data) // 2 - 1000)
open(sys.argv[1], "wb").write(data)' "$dir/data/tiny/train.bin"
run "${train_args[@]}" --out "$dir/run1" --set max_iters=4
expect_error "$dir/data/tiny/train.bin: token id 300 at token 1000 is not below vocab_size 256"
run check-data --data "$dir/data/tiny"
expect_error "train.bin: token id 300 at token 1000"
echo "data_errors_test: an id over vocab_size is one error event, exit 1"

# Item 4: a data set truncated in place under a running trainer: an error, not SIGBUS.
rm -rf "$dir/data/tiny" && cp -r "$dir/good" "$dir/data/tiny"
"$lm" "${train_args[@]}" --out "$dir/run2" --set max_iters=100000 --set eval_interval=100000 \
  --set log_interval=1 > "$dir/out.jsonl" 2> "$dir/err.log" &
pid=$!
for _ in $(seq 1 600); do
  grep -q '"name":"train/loss"' "$dir/out.jsonl" 2>/dev/null && break
  sleep 0.1
done
truncate -s 0 "$dir/data/tiny/train.bin"
set +e
wait "$pid"
rc=$?
set -e
expect_error "$dir/data/tiny/train.bin has 0 bytes but had" "truncated or rewritten in place"
run "${train_args[@]}" --out "$dir/run3" --set max_iters=4
expect_error "$dir/data/tiny/train.bin is not a uint16 token file (0 bytes"
echo "data_errors_test: truncation under a run is one error event, exit 1"

# Item 4: a failed prepare leaves the earlier data set whole, and no temporaries.
rm -rf "$dir/data/tiny" && cp -r "$dir/good" "$dir/data/tiny"
printf '{"text": "fine"}\n{"text": "bad \xff byte"}\n' > "$dir/utf8.jsonl"
run prepare --input "$dir/utf8.jsonl" --out "$dir/data/tiny"
expect_error "$dir/utf8.jsonl line 2: invalid UTF-8 at byte 15"
diff -r "$dir/good" "$dir/data/tiny" > /dev/null || fail "a failed prepare changed the data set"
run "${train_args[@]}" --out "$dir/run4" --set max_iters=2
[ "$rc" = 0 ] || fail "training on the kept data set exited $rc: $(tail -3 "$dir/err.log")"

# Item 12: a lone surrogate and a line over --max-line-bytes, named with file and line.
printf '{"text": "\\ud800"}\n' > "$dir/surrogate.jsonl"
run prepare --input "$dir/surrogate.jsonl" --out "$dir/s"
expect_error "$dir/surrogate.jsonl line 1: a lone surrogate escape"
python3 -c 'import sys; sys.stdout.write("{\"text\": \"a\"}\n{\"text\": \"" + "x" * 5000 + "\"}\n")' \
  > "$dir/long.jsonl"
run prepare --input "$dir/long.jsonl" --out "$dir/l" --max-line-bytes 1000
expect_error "$dir/long.jsonl line 2: longer than the limit of 1000 bytes for a JSONL line"
# A 2 GiB line (sparse: no disk) is refused at the 64 MiB default with bounded memory.
truncate -s 2G "$dir/huge.jsonl"
python3 - "$lm" "$dir/huge.jsonl" "$dir/h" "$dir/out.jsonl" <<'PY' || fail "2 GiB line"
import resource, subprocess, sys
lm, huge, out, events = sys.argv[1:]
with open(events, "w") as stdout:
    rc = subprocess.run([lm, "prepare", "--input", huge, "--out", out, "--threads", "1"],
                        stdout=stdout, stderr=subprocess.DEVNULL, timeout=120).returncode
peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"2 GiB line: exit {rc}, peak RSS {peak_mb:.0f} MB")
assert rc == 1, rc
assert peak_mb < 700, peak_mb  # spheret-lm itself ~350 MB; a 300 MB line took 983 MB before
assert "line 1: longer than the limit of 67108864 bytes" in open(events).read()
PY
echo "data_errors_test: ok"
