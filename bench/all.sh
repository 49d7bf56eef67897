#!/usr/bin/env bash
# `make bench`: every benchmark in turn, each printing its figures, then the goals (issue 47 and
# earlier) as this run measured them, one line each (every line of the run that names a goal), with
# the machine, the date and the commit. The whole output is kept in bench-results/DATE.log.
# Usage: bench/all.sh [build dir]
set -euo pipefail
build=${1:-build}
mkdir -p bench-results
log=bench-results/$(date -u +%Y-%m-%dT%H%M%SZ).log
py=.venv/bin/python

started=$(date -u '+%Y-%m-%d %H:%M UTC')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
header() {
  echo "spheret bench: started $started, commit $commit"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
}

# run NAME COMMAND...: one benchmark, its output to the terminal and the log.
run() {
  local name=$1
  shift
  echo
  echo "=== $name: $*"
  local start=$SECONDS
  local code=0
  "$@" 2>&1 || code=$?
  if [ "$code" = 0 ]; then
    echo "=== $name: $((SECONDS - start)) s"
  else
    echo "=== $name: FAILED (exit $code) after $((SECONDS - start)) s"
  fi
}

{
  header
  run connections "$build/bin/bench_connections"
  run trainer bench/trainer_speed.sh "$build" 300 1
  run diagnostics bench/diag_cost.sh "$build"
  run eval_speed bench/eval_speed.sh "$build"
  run eval_vs_harness "$py" bench/eval_vs_harness.py "$build/bin/spheret-lm"
  run prepare "$py" bench/prepare_speed.py "$build/bin/spheret-prepare" 64
  run coordinator "$build/bin/bench_coordinator_load"
  run campaign bench/campaign_reads.sh "$build" 1/8 1/4 1/2 1
  run asha bench/asha_vs_grid.sh "$build"
} | tee "$log"

{
  echo
  echo "=== goals (issue 47 and earlier), as this run measured them:"
  header
  grep -i "goal" "$log" | grep -v "^===" | sed 's/^ */  /'
  grep "FAILED" "$log" || true
  echo "(the whole run: $log)"
} | tee -a "$log"
