#!/usr/bin/env bash
# The paper's claims tested on two cores (`make claims-cpu`): a coordinator and a worker on
# loopback train the three sweeps of examples/claims-cpu/ (the eight rows, ScaleNorm swapped for
# GeoNorm and Proj-SpheretNorm, the angle cap at pi/2 and none; preset xs on the built-in fortunes
# corpus, 3 seeds each, long enough to leave the first collapse phase), then write
# `spheret report --claims` (every testable claim with its effect, interval, test and verdict) and
# Tables 2-3 of the study (its methods sweep) in the paper's layout. Where .venv has SciPy, every number of the claims
# report is recomputed from the database (tests/client/claims_scipy_check.py).
#
#   scripts/claims_cpu.sh [BUILD_DIR] [OUT_DIR]
#     OUT_DIR (default runs/claims-cpu) gets the database, the logs, claims/ and paper/.
set -euo pipefail
build=${1:-build}
out=${2:-runs/claims-cpu}
bin=$build/bin
started=$(date +%s)
say() { echo "claims-cpu [$(($(date +%s) - started)) s]: $*"; }

mkdir -p "$out" data
rm -rf "$out"/spheret.db* "$out"/worker "$out"/checkpoints "$out"/claims "$out"/paper
if [ ! -f data/fortunes/train.bin ]; then
  "$bin"/spheret-prepare --builtin fortunes --out data/fortunes
fi

source scripts/local_cluster.sh
# One single-threaded trial per core: these models are too small to use two threads well.
start_local_cluster "$bin" "$out" claims-cpu "$(nproc)" 1
say "coordinator on $SPHERET_COORDINATOR (metrics on :$coordinator_metrics_port), database $out/spheret.db"

sweeps=(claims-cpu-methods claims-cpu-scalenorm claims-cpu-angle-cap)
for sweep in "${sweeps[@]}"; do
  say "$("$bin"/spheret submit examples/claims-cpu/"${sweep#claims-cpu-}".yaml)"
done
for sweep in "${sweeps[@]}"; do
  id=$("$bin"/spheret sweeps | awk -v name="$sweep" '$2 == name { print $1 }')
  "$bin"/spheret watch "$id" --plain  # a line per trial that starts or ends, progress every 10 s
  say "$sweep trained"
done

"$bin"/spheret report "${sweeps[@]}" --claims --out "$out"/claims
# Tables 2-3 hold one trial per row and seed: the methods sweep (the other two vary a knob of
# rows it already has, which the paper's layout refuses to merge).
"$bin"/spheret report claims-cpu-methods --paper table2 --paper table3 --out "$out"/paper
if .venv/bin/python -c "import scipy" 2> /dev/null; then
  .venv/bin/python tests/client/claims_scipy_check.py "$out"/spheret.db "$out"/claims/claims.json
  say "every number of the claims report recomputed from $out/spheret.db with SciPy"
fi
"$bin"/spheret report "${sweeps[@]}" --claims --format txt
say "done: $out/claims/ (the claims report) and $out/paper/ (Tables 2-3 of the study)"
say "wall time $(($(date +%s) - started)) s"
