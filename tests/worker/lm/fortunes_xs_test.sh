#!/usr/bin/env bash
# The reference run of the trainer: the fortunes corpus, preset xs (block 128, batch 12,
# learning_rate 1e-3, min_lr 1e-4, warmup 100, beta2 0.99, pre_ln), 300 iterations. nanoGPT's
# train.py reaches val loss 2.60 with these settings; spheret-lm must reach <= 2.65.
# The default suite trains the first 100 of those 300 iterations (max_iters 100, the schedule
# unchanged: lr_decay_iters stays 300), which are bitwise the first 100 of the full run: val loss
# 2.770 at step 100 on one thread (5.52 at step 0; a model that learns no context, the train
# split's unigram byte frequencies, scores 3.38), asserted <= 2.85. The full 300 iterations are
# the slow twin (third argument 300).
# Prints the wall time (not asserted: machines are shared).
# Usage: fortunes_xs_test.sh <spheret-lm> <configs/demo.json> [100|300]
set -euo pipefail
lm=$1
config=$2
steps=${3:-100}
case $steps in
  100) limit=2.85 ;;
  300) limit=2.65 ;;
  *) echo "steps must be 100 or 300, not $steps" >&2; exit 2 ;;
esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$lm" prepare --builtin fortunes --out "$dir/fortunes" > /dev/null
start=$(date +%s.%N)
timeout 900 "$lm" train --config "$config" --out "$dir/run" --set "dataset=$dir/fortunes" \
  --set "max_iters=$steps" > "$dir/events.jsonl" 2> "$dir/train.log" || { tail -5 "$dir/train.log"; exit 1; }
seconds=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
python3 - "$dir/events.jsonl" "$seconds" "$steps" "$limit" <<'PY'
import json, sys
done = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "done"][0]
steps, limit = int(sys.argv[3]), float(sys.argv[4])
print(f"fortunes xs pre_ln: {done['step']} steps in {float(sys.argv[2]):.1f} s, "
      f"val loss {done['val_loss']:.4f}, train loss (avg of last 200) {done['train_loss_avg']:.4f}")
assert done["step"] == steps, done
assert done["val_loss"] <= limit, f"val loss {done['val_loss']} above {limit}"
PY
