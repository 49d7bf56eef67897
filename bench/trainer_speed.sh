#!/usr/bin/env bash
# spheret-lm's training throughput against the same model and step in PyTorch (eager), both on the
# fortunes data set at preset xs (block 128, batch 12), same machine, same run; then the step time of
# every method relative to pre_ln. The machine may be shared, so the programs run in interleaved
# rounds; each ratio to PyTorch is the median over rounds of the ratio within a round, and the
# tokens/s shown are the best round's median step (the least disturbed one). The methods' step
# times come from `spheret-lm bench`: all nine models in one process, a step of each in turn.
# Usage: bench/trainer_speed.sh [build dir] [steps] [rounds]
set -euo pipefail
build=${1:-build}
steps=${2:-60}
rounds=${3:-3}
[ -s data/fortunes/train.bin ] || "$build/bin/spheret-lm" prepare --builtin fortunes --out data/fortunes 2>/dev/null
threads=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Median tokens/s of the steps after the 10th (warm-up) from a run's events on stdin.
median_tokens_per_sec() {
  python3 -c '
import json, sys
v = sorted(e["value"] for e in map(json.loads, sys.stdin)
           if e.get("name") == "tokens_per_sec" and e["step"] >= 10)
print(f"{v[len(v) // 2]:.1f}")'
}

# lm ROUND NAME [--set key=value ...]: one spheret-lm run, its figure appended to $out/figures.
lm() {
  local round=$1 name=$2
  shift 2
  echo "$round $name $(OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" train --config configs/demo.json \
    --out "$out/run" --set dataset=data/fortunes --set max_iters="$steps" --set eval_interval="$steps" \
    --set eval_iters=1 --set log_interval=1 "$@" 2>/dev/null | median_tokens_per_sec)" >> "$out/figures"
  rm -rf "$out/run"
}

for round in $(seq "$rounds"); do
  echo "$round torch $(PYTHONWARNINGS=ignore .venv/bin/python bench/torch_reference.py \
    --data data/fortunes --steps "$steps" --threads "$threads" 2>/dev/null |
    sed -n 's/^torch reference: \([0-9.]*\) tokens\/s.*/\1/p')" >> "$out/figures"
  lm "$round" pre_ln
  # pre_ln with the whole batch in one shard on all threads (intra-op parallelism only).
  lm "$round" pre_ln_1shard --set batch_shards=1
  echo "round $round/$rounds done" >&2
done

python3 - "$out/figures" "$steps" "$rounds" "$threads" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(dict)  # round -> name -> tokens/s
for line in open(sys.argv[1]):
    round_, name, value = line.split()
    runs[round_][name] = float(value)
steps, rounds, threads = sys.argv[2:]
names = list(next(iter(runs.values())))
best = {n: max(r[n] for r in runs.values()) for n in names}
def ratio(a, b):  # median over rounds of tokens/s(a) / tokens/s(b)
    return statistics.median(r[a] / r[b] for r in runs.values())
print(f"preset xs, block 128, batch 12, fp32, {threads} threads; {rounds} rounds of {steps} steps, "
      f"median step over steps 10..{steps}")
print(f"PyTorch eager step (bench/torch_reference.py): {best['torch']:.0f} tokens/s (best round)")
print(f"spheret-lm pre_ln, {threads} batch shards: {best['pre_ln']:.0f} tokens/s; "
      f"{ratio('pre_ln', 'torch'):.2f}x PyTorch (median over rounds)")
print(f"spheret-lm pre_ln, batch_shards=1 ({threads} intra-op threads): "
      f"{best['pre_ln_1shard']:.0f} tokens/s; {ratio('pre_ln_1shard', 'torch'):.2f}x PyTorch")
PY

echo
echo "step time of each method (p_spheret with p = 3), side by side in one process:"
OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" bench --config configs/demo.json \
  --set dataset=data/fortunes --set p=3 --steps $((steps * rounds / 2)) 2>/dev/null

echo
echo "step time of the related methods and looped models (docs/methods.md §3) against pre_ln,"
echo "side by side in one process (loops=2: the 4 blocks twice; +per_loop_loss: a readout per loop):"
OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" bench --config configs/demo.json \
  --set dataset=data/fortunes --steps $((steps * rounds / 2)) \
  --methods pre_ln,ngpt,autonorm,pre_ln+loops=2,pre_ln+loops=2+per_loop_loss=true,geonorm+loops=2+per_loop_loss=true,autonorm+loops=2+per_loop_loss=true \
  2>/dev/null

