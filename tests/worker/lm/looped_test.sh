#!/usr/bin/env bash
# Looped models end to end (docs/methods.md §3): preset xs (4 blocks x 128) looped 4 times with a
# per-loop loss and a scale-invariant readout (rmsnorm), on fortunes. With pre_ln the hidden-state
# norm at the end of each loop grows from loop to loop (the readout hides it from the loss); with
# proj_spheret it stays at the ScaleNorm radius sqrt(128) at every depth. Also: the per-loop
# losses and the objective are reported, train/loss is the last loop's, and every layer of the
# 16-deep unrolled stack has its diag row. The default suite trains 8 steps (diag rows at steps 0
# and 4): pre_ln's ||h|| after loops 1..4 is already 4.8, 9.6, 14.4, 19.1 at step 5 (0.56 .. 1.77
# at step 0), far past the 1.5x asserted; the slow twin trains 60 (third argument 60, rows at 40).
# Usage: looped_test.sh <spheret-lm> <configs/demo.json> [8|60]
set -euo pipefail
lm=$1
config=$2
steps=${3:-8}
case $steps in
  8) warmup=2 diag=4 ;;
  60) warmup=10 diag=20 ;;
  *) echo "steps must be 8 or 60, not $steps" >&2; exit 2 ;;
esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$lm" prepare --builtin fortunes --out "$dir/fortunes" > /dev/null
for method in pre_ln proj_spheret; do
  timeout 600 "$lm" train --config "$config" --out "$dir/$method" --set "dataset=$dir/fortunes" \
    --set method=$method --set loops=4 --set per_loop_loss=true --set readout=rmsnorm \
    --set block_size=64 --set batch_size=8 --set max_iters=$steps --set lr_decay_iters=$steps \
    --set warmup_iters=$warmup --set eval_interval=$steps --set eval_iters=2 --set diag_interval=$diag \
    --set log_interval=1 > "$dir/$method.jsonl" 2> "$dir/$method.log" ||
    { tail -5 "$dir/$method.log"; exit 1; }
done
python3 - "$dir" "$steps" <<'PY'
import json, math, sys
d, last_step = sys.argv[1], int(sys.argv[2]) - 1
def events(method):
    return [json.loads(line) for line in open(f"{d}/{method}.jsonl")]
def loop_norms(method):
    """||h|| after each loop (the mlp row of layers 4, 8, 12, 16) at the last diag step."""
    diags = [e for e in events(method) if e["type"] == "diag" and "hidden_norm" in e["values"]]
    last = max(e["step"] for e in diags)
    rows = {(e["layer"], e["sublayer"]): e["values"]["hidden_norm"]
            for e in diags if e["step"] == last}
    assert len(rows) == 32, f"{method}: {len(rows)} diag rows at step {last}, want 2 x 16"
    return last, [rows[(4 * k, "mlp")] for k in range(1, 5)]
step, pre = loop_norms("pre_ln")
print(f"pre_ln ||h|| after loops 1..4 at step {step}: " + ", ".join(f"{v:.2f}" for v in pre))
assert all(b > a for a, b in zip(pre, pre[1:])), f"pre_ln ||h|| does not grow over loops: {pre}"
assert pre[-1] > 1.5 * pre[0], f"pre_ln ||h|| grows by less than 1.5x over 4 loops: {pre}"
step, sphere = loop_norms("proj_spheret")
print(f"proj_spheret ||h|| after loops 1..4 at step {step}: " + ", ".join(f"{v:.4f}" for v in sphere))
radius = math.sqrt(128)
assert all(abs(v / radius - 1) < 1e-4 for v in sphere), f"sphere ||h|| moved off {radius}: {sphere}"
for method in ("pre_ln", "proj_spheret"):
    metrics = {}
    for e in events(method):
        if e["type"] == "metric":
            metrics[(e["name"], e["step"])] = e["value"]
    for step in (0, last_step):
        loops = [metrics[(f"train/loop_loss/{k}", step)] for k in range(1, 5)]
        assert abs(metrics[("train/objective", step)] - sum(loops)) < 1e-4 * sum(loops), (method, step)
        assert metrics[("train/loss", step)] == loops[-1], (method, step)
    print(f"{method}: per-loop CE at step {last_step}: " + ", ".join(f"{v:.3f}" for v in loops))
PY
