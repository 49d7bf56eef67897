#!/usr/bin/env bash
# spheret-lm's training throughput against the same model and step in PyTorch (eager), both on the
# fortunes data set at preset xs (block 128, batch 12), same machine, same run; then the step time of
# every method relative to pre_ln. The machine may be shared, so the programs run in interleaved
# rounds and each figure is the best round's median step (the least disturbed one).
# Usage: bench/trainer_speed.sh [build dir] [steps] [rounds]
set -euo pipefail
build=${1:-build}
steps=${2:-60}
rounds=${3:-3}
methods="pre_ln post_ln pre_dyt peri_ln keel geonorm proj_spheret cay_spheret p_spheret"
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

for round in $(seq "$rounds"); do
  PYTHONWARNINGS=ignore .venv/bin/python bench/torch_reference.py --data data/fortunes \
    --steps "$steps" --threads "$threads" 2>/dev/null |
    sed -n 's/^torch reference: \([0-9.]*\) tokens\/s.*/torch \1/p' >> "$out/figures"
  for method in $methods; do
    echo "$method $(OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" train --config configs/demo.json \
      --out "$out/run" --set dataset=data/fortunes --set method="$method" --set p=3 \
      --set max_iters="$steps" --set eval_interval="$steps" --set eval_iters=1 --set log_interval=1 2>/dev/null | median_tokens_per_sec)" >> "$out/figures"
    rm -rf "$out/run"
  done
  # pre_ln again with the whole batch in one shard on all threads (intra-op parallelism only).
  echo "pre_ln_1shard $(OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" train --config configs/demo.json \
    --out "$out/run" --set dataset=data/fortunes --set batch_shards=1 \
    --set max_iters="$steps" --set eval_interval="$steps" --set eval_iters=1 --set log_interval=1 2>/dev/null | median_tokens_per_sec)" >> "$out/figures"
  rm -rf "$out/run"
  echo "round $round/$rounds done" >&2
done

python3 - "$out/figures" "$steps" "$rounds" "$threads" <<'PY'
import collections, sys
best = collections.defaultdict(float)
for line in open(sys.argv[1]):
    name, value = line.split()
    best[name] = max(best[name], float(value))
steps, rounds, threads = sys.argv[2:]
print(f"preset xs, block 128, batch 12, fp32, {threads} threads; best of {rounds} rounds "
      f"of the median step over steps 10..{steps}")
print(f"PyTorch eager step (bench/torch_reference.py): {best['torch']:.0f} tokens/s")
print(f"spheret-lm pre_ln: {best['pre_ln']:.0f} tokens/s = {best['pre_ln'] / best['torch']:.2f}x PyTorch "
      f"(batch in {threads} shards, one per thread)")
print(f"spheret-lm pre_ln, batch_shards=1: {best['pre_ln_1shard']:.0f} tokens/s = "
      f"{best['pre_ln_1shard'] / best['torch']:.2f}x PyTorch (one batch on {threads} intra-op threads)")
print()
print(f"{'method':<14}{'tokens/s':>10}{'step time vs pre_ln':>22}")
for name in [n for n in best if n not in ("torch", "pre_ln_1shard")]:
    print(f"{name:<14}{best[name]:>10.0f}{best['pre_ln'] / best[name]:>21.3f}x")
PY
