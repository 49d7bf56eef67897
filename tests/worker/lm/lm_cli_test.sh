#!/usr/bin/env bash
# spheret-lm end to end: prepare a small text, train a few steps, check the events and exit codes.
# Usage: lm_cli_test.sh <path to spheret-lm>
set -euo pipefail
lm=$1
source "$(dirname "$0")/common.sh"
"$lm" prepare --input "$dir/text" --out "$dir/data/tiny" > "$dir/prepare.jsonl" 2> "$dir/prepare.log"
grep -q '"type":"prepared"' "$dir/prepare.jsonl" || fail "no prepared event"
[ -s "$dir/data/tiny/train.bin" ] && [ -s "$dir/data/tiny/val.bin" ] || fail "no .bin files"

"$lm" train --out "$dir/run" --data-root "$dir/data" --set dataset=tiny --set scale=xs \
  --set block_size=32 --set batch_size=4 --set gradient_accumulation_steps=1 --set max_iters=6 \
  --set warmup_iters=2 --set lr_decay_iters=6 --set eval_interval=3 --set eval_iters=2 \
  --set log_interval=1 --set diag_interval=3 --set method=p_spheret --set p=0.5 \
  > "$dir/events.jsonl" 2> "$dir/train.log" || fail "train exited $?: $(tail -3 "$dir/train.log")"
python3 - "$dir/events.jsonl" <<'PY'
import json, math, sys
events = [json.loads(line) for line in open(sys.argv[1])]
metrics = [e for e in events if e["type"] == "metric"]
names = {e["name"] for e in metrics}
need = {"train/loss", "train/loss_avg", "lr", "grad_norm", "tokens_per_sec", "val/loss", "val/ppl"}
assert need <= names, f"missing metrics: {need - names}"
assert sorted({e["step"] for e in metrics if e["name"] == "train/loss"}) == list(range(6))
val = [e for e in metrics if e["name"] == "val/loss"]
assert [e["step"] for e in val] == [0, 3, 6], val
ppl = {e["step"]: e["value"] for e in metrics if e["name"] == "val/ppl"}
assert all(abs(ppl[e["step"]] - math.exp(e["value"])) < 1e-6 * ppl[e["step"]] for e in val)
# The connection's rows (typed values: {"type":"diag",...,"values":{"hidden_norm":..,...}}).
diag = [e["values"] | {"step": e["step"]} for e in events
        if e["type"] == "diag" and "hidden_norm" in e["values"]]
assert len(diag) == 2 * 4 * 2, len(diag)  # steps 0 and 3, 4 layers, 2 sublayers
radius = math.sqrt(128)
# The first layer's ScaleNorm puts h on a sphere of radius r (sqrt(C) at init, learnable below it)
# and every sphere update keeps it there: one norm per step through the whole depth.
assert all(abs(d["hidden_norm"] - radius) < 1e-3 for d in diag if d["step"] == 0), "not at sqrt(C)"
for step in {d["step"] for d in diag}:
    norms = [d["hidden_norm"] for d in diag if d["step"] == step]
    assert max(norms) - min(norms) < 1e-4 and max(norms) < radius + 1e-3, (step, norms)
assert all(d.get("alpha") is not None for d in diag)
done = [e for e in events if e["type"] == "done"]
assert len(done) == 1 and done[0]["step"] == 6, done
PY
[ -s "$dir/run/config.json" ] || fail "no config.json in the run folder"
[ -s "$dir/run/ckpt.pt" ] || fail "no checkpoint in the run folder"

# Sampling from the run's checkpoint continues the prompt; the same seed gives the same text.
"$lm" sample --run "$dir/run" --prompt "line 1" --tokens 40 --seed 7 > "$dir/sample1.txt" 2>/dev/null
"$lm" sample --run "$dir/run" --prompt "line 1" --tokens 40 --seed 7 > "$dir/sample2.txt" 2>/dev/null
[ "$(head -c 6 "$dir/sample1.txt")" = "line 1" ] || fail "sample does not start with the prompt"
[ "$(wc -c < "$dir/sample1.txt")" -ge 46 ] || fail "sample too short: $(wc -c < "$dir/sample1.txt")"
cmp -s "$dir/sample1.txt" "$dir/sample2.txt" || fail "sample with one seed differs between runs"

# Resuming a finished run continues from its checkpoint: nothing left to train, done at step 6.
"$lm" train --out "$dir/run" --data-root "$dir/data" --set dataset=tiny --set scale=xs \
  --set block_size=32 --set batch_size=4 --set gradient_accumulation_steps=1 --set max_iters=6 \
  --set warmup_iters=2 --set lr_decay_iters=6 --set eval_interval=3 --set eval_iters=2 \
  --set method=p_spheret --set p=0.5 --resume > "$dir/resume.jsonl" 2>/dev/null \
  || fail "resume of a finished run failed"
grep -q '"type":"done","val_loss"' "$dir/resume.jsonl" || grep -q '"step":6' "$dir/resume.jsonl" \
  || fail "resumed run did not finish at step 6: $(cat "$dir/resume.jsonl")"
grep -q '"name":"train/loss"' "$dir/resume.jsonl" && fail "a finished run trained again after --resume"

# Bad input: a clear error event and exit code 1; a bad command line exits 2.
set +e
"$lm" train --out "$dir/run2" --set lerning_rate=1 > "$dir/err.jsonl" 2>/dev/null
rc=$?
set -e
[ "$rc" = 1 ] || fail "unknown key exited $rc, want 1"
grep -q "unknown config key 'lerning_rate'" "$dir/err.jsonl" || fail "error event does not name the key"
printf 'garbage' | dd of="$dir/run/ckpt.pt" bs=1 seek=100 conv=notrunc status=none
set +e
"$lm" train --out "$dir/run" --data-root "$dir/data" --set dataset=tiny --set scale=xs \
  --set block_size=32 --set batch_size=4 --set gradient_accumulation_steps=1 --set max_iters=6 \
  --set warmup_iters=2 --set lr_decay_iters=6 --set eval_interval=3 --set eval_iters=2 \
  --set method=p_spheret --set p=0.5 --resume > "$dir/corrupt.jsonl" 2>/dev/null
rc=$?
set -e
[ "$rc" = 1 ] || fail "corrupt checkpoint exited $rc, want 1"
grep -q "checksum mismatch" "$dir/corrupt.jsonl" || fail "corrupt checkpoint: $(cat "$dir/corrupt.jsonl")"
set +e
"$lm" trian > /dev/null 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "bad subcommand exited $rc, want 2"

# SIGTERM: the trainer finishes its step, checkpoints, writes a "stopped" event and exits 4;
# --resume then trains the rest (and the steps it logs continue where it stopped).
long_run=(train --out "$dir/run3" --data-root "$dir/data" --set dataset=tiny --set scale=xs
  --set block_size=32 --set batch_size=4 --set gradient_accumulation_steps=1
  --set max_iters=400 --set warmup_iters=2 --set lr_decay_iters=400 --set eval_interval=200
  --set eval_iters=1 --set log_interval=1)
"$lm" "${long_run[@]}" > "$dir/stop.jsonl" 2> "$dir/stop.log" &
pid=$!
for _ in $(seq 1 600); do
  grep -q '"name":"train/loss"' "$dir/stop.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" = 4 ] || fail "SIGTERM exited $rc, want 4: $(tail -3 "$dir/stop.log")"
stopped=$(python3 -c 'import json,sys; print([e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "stopped"][0]["step"])' "$dir/stop.jsonl") \
  || fail "no stopped event: $(tail -3 "$dir/stop.jsonl")"
[ "$stopped" -lt 400 ] || fail "stopped at the end, not early"
"$lm" "${long_run[@]}" --resume > "$dir/continued.jsonl" 2>/dev/null \
  || fail "resume after SIGTERM failed"
python3 - "$dir/continued.jsonl" "$stopped" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
steps = [e["step"] for e in events if e.get("name") == "train/loss"]
assert steps == list(range(int(sys.argv[2]), 400)), (steps[:3], sys.argv[2])
assert events[-1]["type"] == "done" and events[-1]["step"] == 400
PY
echo "spheret-lm end to end: ok"

# bench: the methods side by side, one table row each; a bad method is refused naming the key.
"$lm" bench --data-root "$dir/data" --set dataset=tiny --set scale=xs --set block_size=32 \
  --set batch_size=4 --set gradient_accumulation_steps=1 --methods pre_ln,geonorm --steps 3 \
  --warmup 1 > "$dir/bench.txt" 2> "$dir/bench.log" || fail "bench exited $?: $(tail -3 "$dir/bench.log")"
grep -Eq '^pre_ln +[0-9.]+ +[0-9]+ +1\.000x$' "$dir/bench.txt" || fail "bench: no pre_ln row: $(cat "$dir/bench.txt")"
grep -Eq '^geonorm +[0-9.]+ +[0-9]+ +[0-9.]+x$' "$dir/bench.txt" || fail "bench: no geonorm row"
code=0
"$lm" bench --data-root "$dir/data" --set dataset=tiny --methods pre_ln,nope > /dev/null 2> "$dir/bench_bad.log" || code=$?
[ "$code" = 1 ] || fail "bench with an unknown method exited $code"
grep -q "config key 'method' must be one of" "$dir/bench_bad.log" || fail "bench: $(cat "$dir/bench_bad.log")"
echo "lm_cli_test: bench passed"
