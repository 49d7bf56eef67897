#!/usr/bin/env bash
# spheret-lm's training throughput against the same model and step in PyTorch (eager), both on the
# fortunes data set at preset xs (pre_ln, block 128, batch 12), same machine, same run.
# Usage: bench/trainer_speed.sh [build dir] [steps]
set -euo pipefail
build=${1:-build}
steps=${2:-60}
[ -s data/fortunes/train.bin ] || "$build/bin/spheret-lm" prepare --builtin fortunes --out data/fortunes 2>/dev/null
threads=$(nproc)
ref=$(PYTHONWARNINGS=ignore .venv/bin/python bench/torch_reference.py --data data/fortunes \
      --steps "$steps" --threads "$threads" 2>/dev/null)
echo "$ref"
ours=$(OMP_NUM_THREADS=$threads "$build/bin/spheret-lm" train --config configs/demo.json \
       --out "$(mktemp -d)" --set dataset=data/fortunes --set max_iters="$steps" \
       --set eval_interval="$steps" --set eval_iters=1 --set log_interval=1 2>/dev/null |
       python3 -c '
import json, sys
v = sorted(e["value"] for e in map(json.loads, sys.stdin)
           if e.get("name") == "tokens_per_sec" and e["step"] >= 10)
print(f"{v[len(v) // 2]:.0f}")')
python3 - "$ref" "$ours" <<'PY'
import re, sys
ref = float(re.search(r"([0-9.]+) tokens/s", sys.argv[1]).group(1))
ours = float(sys.argv[2])
print(f"spheret-lm: {ours:.0f} tokens/s (median of the steps after 10) = {ours / ref:.2f}x the PyTorch step")
PY
