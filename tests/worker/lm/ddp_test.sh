#!/usr/bin/env bash
# Two spheret-lm ranks over c10d Gloo on loopback against one process with the same global batch
# (gradient_accumulation_steps 2 on one process = 1 per rank on two): the step losses must agree
# to 1e-5. Every process is bounded by `timeout`.
# Usage: ddp_test.sh <path to spheret-lm>
set -euo pipefail
lm=$1
source "$(dirname "$0")/common.sh"
"$lm" prepare --input "$dir/text" --out "$dir/data" > /dev/null 2>&1

common=(--set "dataset=$dir/data" --set n_layer=2 --set n_head=2 --set n_embd=32
        --set block_size=16 --set batch_size=4 --set gradient_accumulation_steps=2
        --set max_iters=12 --set warmup_iters=2 --set lr_decay_iters=12 --set learning_rate=3e-3
        --set eval_interval=6 --set eval_iters=2 --set method=geonorm)
timeout 120 "$lm" train --out "$dir/single" "${common[@]}" > "$dir/single.jsonl" 2> "$dir/single.log" \
  || fail "single process exited $?: $(tail -3 "$dir/single.log")"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for rank in 0 1; do
  WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 120 "$lm" train --out "$dir/ddp" "${common[@]}" > "$dir/rank$rank.jsonl" 2> "$dir/rank$rank.log" &
  pids[$rank]=$!
done
for rank in 0 1; do
  wait "${pids[$rank]}" || fail "rank $rank exited $?: $(tail -3 "$dir/rank$rank.log")"
done
[ ! -s "$dir/rank1.jsonl" ] || fail "rank 1 wrote events"
grep -q "2 ranks" "$dir/rank0.log" || fail "rank 0 did not train on 2 ranks: $(head -3 "$dir/rank0.log")"

python3 - "$dir/single.jsonl" "$dir/rank0.jsonl" <<'PY'
import json, sys
def losses(path):
    return {e["step"]: e["value"] for e in map(json.loads, open(path))
            if e["type"] == "metric" and e["name"] in ("train/loss",)}
single, ddp = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(single) == list(range(12)) and sorted(ddp) == sorted(single), (single, ddp)
worst = max(abs(single[s] - ddp[s]) for s in single)
print(f"max |single - 2 ranks| train/loss difference over 12 steps: {worst:.2e}")
assert worst < 1e-5, worst
PY
echo "data parallel over Gloo: ok"
