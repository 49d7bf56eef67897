#!/usr/bin/env bash
# The whole path on one machine: a coordinator and a worker on loopback, a sweep submitted and
# followed with the CLI, then its results table and report (tables + figures).
#
#   scripts/demo.sh [BUILD_DIR] [SWEEP_FILE] [OUT_DIR]
#     make demo runs it on examples/demo-sweep.yaml into runs/demo/; any sweep on the fortunes
#     data set runs the same way, e.g.
#     scripts/demo.sh build examples/related-methods.yaml runs/related
set -euo pipefail
build=${1:-build}
sweep_file=${2:-examples/demo-sweep.yaml}
bin=$build/bin
out=${3:-runs/demo}
mkdir -p "$out" data
rm -f "$out"/spheret.db*

if [ ! -f data/fortunes/train.bin ]; then
  "$bin"/spheret-lm prepare --builtin fortunes --out data/fortunes
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
}
trap cleanup EXIT

"$bin"/spheret-coordinator --db "$out"/spheret.db --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  > "$out"/coordinator.out 2> "$out"/coordinator.log &
pids+=($!)
for _ in $(seq 100); do
  [ -s "$out"/coordinator.out ] && break
  sleep 0.1
done
read -r _ port _ metrics < "$out"/coordinator.out
export SPHERET_COORDINATOR=127.0.0.1:$port
echo "demo: coordinator on $SPHERET_COORDINATOR (metrics on :$metrics), database $out/spheret.db"

"$bin"/spheret-worker --coordinator "$SPHERET_COORDINATOR" --cpu-slots 1 --threads-per-slot "$(nproc)" --worker-id demo-worker \
  --work-dir "$out"/worker --checkpoint-root "$out"/checkpoints --data-root data \
  --lm "$bin"/spheret-lm --metrics-listen 127.0.0.1:0 2> "$out"/worker.log &
pids+=($!)

submitted=$("$bin"/spheret submit "$sweep_file")
echo "demo: $submitted"
sweep=$(echo "$submitted" | sed -E 's/^sweep ([0-9]+):.*/\1/')
"$bin"/spheret watch "$sweep"
echo
"$bin"/spheret results "$sweep" --metric val/loss --metric train/loss_avg
"$bin"/spheret report "$sweep" --out "$out"/report
echo "demo: open $out/report/README.md (tables) and $out/report/val_loss.png (curves)"
