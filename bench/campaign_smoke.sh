#!/usr/bin/env bash
# ctest bench_campaign_db_smoke: bench_campaign_db at 1/100 of the campaign's steps (500 steps a
# trial, val and geometry at steps 249 and 499), then the database's row counts: 48 trials
# SUCCEEDED in 2 sweeps, train/loss 48 x 500, val/loss 48 x 2, geometry on every layer up to 36
# (the L models) for all 48, 16 L models x 20 zero-shot scores, and every row the generator sent
# acknowledged and stored. Then a coordinator on the file, and `results` prints the 8 rows with
# all six cells.
#
#   bench/campaign_smoke.sh BIN_DIR     (run from the repository root)
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/campaign.db
"$bin"/bench_campaign_db --db "$db" --fraction 1/100 | tee "$work/out"
sql() { "$bin"/spheret sql --db "$db" --format csv "$1" | tail -n 1; }
failures=0
expect() {
  local got
  got=$(sql "$2")
  if [ "$got" = "$3" ]; then
    echo "ok: $1 = $got"
  else
    echo "FAIL: $1 = $got, expected $3 ($2)"
    failures=$((failures + 1))
  fi
}
expect "sweeps" "SELECT count(*) FROM sweeps" 2
expect "trials SUCCEEDED" "SELECT count(*) FROM trials WHERE state = 'SUCCEEDED'" 48
expect "train/loss rows" "SELECT count(*) FROM curves WHERE metric = 'train/loss'" 24000
expect "val/loss rows" "SELECT count(*) FROM curves WHERE metric = 'val/loss'" 96
expect "val/ppl steps" "SELECT min(step) || ' ' || max(step) FROM curves WHERE metric = 'val/ppl'" \
  "249 499"
expect "trials with geometry" "SELECT count(DISTINCT trial_id) FROM layer_values" 48
expect "deepest layer" "SELECT max(layer) FROM layer_values" 36
expect "model rows" "SELECT count(*) > 0 FROM layer_values WHERE sublayer = 'model'" 1
expect "zero-shot scores" "SELECT count(*) FROM evals" 320
expect "trials scored" "SELECT count(DISTINCT trial_id) FROM evals" 16
# "sent M metric rows (A acknowledged), L layer values": every row sent acknowledged and stored.
read -r sent acked layer < <(sed -nE \
  's/.* sent ([0-9]+) metric rows \(([0-9]+) acknowledged\), ([0-9]+) layer values.*/\1 \2 \3/p' \
  "$work/out")
[ "$acked" = "$sent" ] || { echo "FAIL: $acked metric rows acknowledged of $sent"; failures=$((failures + 1)); }
expect "metric rows stored" "SELECT count(*) FROM scalars" "$sent"
expect "layer values stored" "SELECT count(*) FROM layer_values" "$layer"
# The reads run on it: the coordinator restarts on the file and results prints all 48 rows.
"$bin"/spheret-coordinator --db "$db" --listen 127.0.0.1:0 --metrics-listen '' \
  > "$work/coordinator.out" 2> "$work/coordinator.log" &
pid=$!
for _ in $(seq 200); do [ -s "$work/coordinator.out" ] && break; sleep 0.05; done
read -r _ port _ < "$work/coordinator.out"
# A row per method, each with six cells (2 corpora x 3 scales) of one trial: "8.626 (1)".
lines=$("$bin"/spheret --coordinator "127.0.0.1:$port" results fineweb-edu openwebtext |
  grep -c '(1).*(1).*(1).*(1).*(1).*(1)' || true)
kill -TERM "$pid"
wait "$pid" || true
if [ "$lines" != 8 ]; then
  echo "FAIL: results printed $lines rows of six trials, expected 8"
  failures=$((failures + 1))
fi
[ "$failures" = 0 ] && echo "campaign smoke: all checks passed"
exit "$failures"
