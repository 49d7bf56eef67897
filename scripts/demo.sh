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
  "$bin"/spheret-prepare --builtin fortunes --out data/fortunes
fi

source scripts/local_cluster.sh
start_local_cluster "$bin" "$out" demo-worker 1 "$(nproc)"
echo "demo: coordinator on $SPHERET_COORDINATOR (metrics on :$coordinator_metrics_port), database $out/spheret.db"

submitted=$("$bin"/spheret submit "$sweep_file")
echo "demo: $submitted"
sweep=$(echo "$submitted" | sed -E 's/^sweep ([0-9]+):.*/\1/')
"$bin"/spheret watch "$sweep"
echo
"$bin"/spheret results "$sweep" --metric val/loss --metric train/loss_avg
"$bin"/spheret report "$sweep" --out "$out"/report
echo "demo: open $out/report/README.md (tables) and $out/report/val_loss.png (curves)"
