#!/usr/bin/env bash
# The read side on the paper's campaign database (issue 47): for each fraction of the campaign's
# steps, bench_campaign_db writes the database through the coordinator's ingest path, then this
# script starts spheret-coordinator on it and measures, one line each beside its goal:
#   size      the database file (+ WAL) and its rows (scalars + layer_values, evals);
#   restart   spheret-coordinator from exec to its first answered RPC (`spheret sweeps`), twice:
#             on the freshly written file and after a SIGTERM (goal <= 5 s);
#   paper     `spheret report SWEEPS --paper all --out DIR` (Tables 2-5, Figures 2-3);
#   report    `spheret report SWEEPS --out DIR` (the general report: tables and curves);
#   results   `spheret results SWEEPS`;
#   plot      `spheret plot SWEEPS --metric val/loss --out FILE.png` (gnuplot), and beside it the
#             largest reads of the file: plot-train (train/loss, every step of 48 trials) and
#             plot-diag (`--diag theta`: theta on every layer at every geometry step);
#   watch     `spheret watch ID --plain` on the ended sweep: its first screen is its whole output
#             (every trial's line, then "sweep N ended: ..."), after which it returns;
#             each of these reads: wall time and peak RSS (/usr/bin/time: the largest of its
#             processes, the CLI or its gnuplot), goal <= 5 s and <= 1 GB; the coordinator's own
#             peak RSS (VmHWM) after them is printed too;
#   scrape    GET /metrics with curl, slowest and median of 5 (goal <= 100 ms).
# Then "time against rows": each read's seconds per million rows, fraction by fraction.
#
#   bench/campaign_reads.sh [BUILD_DIR] [FRACTION...]     (default: build 1/8)
#   CAMPAIGN_READ_LIMIT=S stops a read after S seconds (default 300; it then counts as S s).
#   CAMPAIGN_DIR=DIR keeps the databases and outputs there (default: a temporary folder, removed).
#   CAMPAIGN_BASELINE=BUILD_DIR (another build, e.g. of the commit before a change): its
#   spheret-coordinator serves the same file beside this build's, and each read runs first with its
#   CLI against it, then with this build's: interleaved pairs, with the ratio (baseline / this).
set -euo pipefail
build=${1:-build}
shift || true
fractions=("$@")
[ ${#fractions[@]} -gt 0 ] || fractions=(1/8)
bin=$build/bin
sweeps=(fineweb-edu openwebtext)
keep=${CAMPAIGN_DIR:-}
limit=${CAMPAIGN_READ_LIMIT:-300}
baseline=${CAMPAIGN_BASELINE:-}
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
coordinator_pid= baseline_pid=
cleanup() {
  [ -z "$coordinator_pid" ] || kill -TERM "$coordinator_pid" 2> /dev/null || true
  [ -z "$baseline_pid" ] || kill -TERM "$baseline_pid" 2> /dev/null || true
  wait 2> /dev/null || true
  [ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
verdict() { awk -v v="$1" -v goal="$2" 'BEGIN { print (v <= goal ? "met" : "NOT met") }'; }
sql() { "$bin"/spheret sql --db "$db" --format csv "$1" | tail -n 1; }

# start_coordinator LOG [BIN]: starts BIN's (default $bin) on $db; sets coordinator_pid, port,
# metrics_port, serving_s.
start_coordinator() {
  local out=$work/coordinator.out start
  rm -f "$out"
  start=$(now)
  "${2:-$bin}"/spheret-coordinator --db "$db" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
    > "$out" 2>> "$1" &
  coordinator_pid=$!
  for _ in $(seq 1000); do
    [ -s "$out" ] && break
    sleep 0.005
  done
  read -r _ port _ metrics_port < "$out"
  export SPHERET_COORDINATOR=127.0.0.1:$port
  until "$bin"/spheret sweeps > /dev/null 2>&1; do sleep 0.005; done
  serving_s=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
}

stop_coordinator() {
  kill -TERM "$coordinator_pid"
  wait "$coordinator_pid" || true
  coordinator_pid=
}

# timed NAME COMMAND...: wall seconds and peak RSS of one read; prints its line, sets seconds_NAME.
timed() {
  local name=$1 stats
  shift
  stats=$work/time.$name
  local ok=1
  /usr/bin/time -f "%e %M" -o "$stats" timeout "$limit" "$@" > "$work/$name.out" \
    2> "$work/$name.err" || { ok=0; echo "  $name FAILED or over $limit s:"; tail -n 3 "$work/$name.err"; }
  read -r secs kb < <(tail -n 1 "$stats")
  printf -v "seconds_$name" '%s' "$secs"
  printf '  %-10s %6.2f s, peak RSS %7.1f MB: %s (goal <= 5 s and <= 1 GB: %s)\n' "$name" "$secs" \
    "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$*" \
    "$(awk -v s="$secs" -v k="$kb" -v ok="$ok" \
      'BEGIN { print (ok && s <= 5 && k <= 1048576 ? "met" : "NOT met") }')"
}

# read_pair NAME ARGS...: `spheret ARGS` timed as NAME (timed); with a baseline, first its CLI
# against its coordinator (as base_NAME), then the ratio of the two times.
read_pair() {
  local name=$1
  shift
  if [ -n "$baseline" ]; then
    SPHERET_COORDINATOR=$baseline_address timed "base_$name" "$baseline"/bin/spheret "$@"
  fi
  timed "$name" "$bin"/spheret "$@"
  if [ -n "$baseline" ]; then
    local base_var=seconds_base_$name this_var=seconds_$name
    awk -v n="$name" -v b="${!base_var}" -v t="${!this_var}" \
      'BEGIN { printf "  %-10s baseline / this build: %.2fx (%.2f s / %.2f s)\n", n, b / t, b, t }'
  fi
}

scrape() {
  local times=()
  for _ in 1 2 3 4 5; do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$metrics_port/metrics")")
  done
  read -r slowest median bytes < <(printf '%s\n' "${times[@]}" | sort -g | awk -v port="$metrics_port" \
    '{ t[NR] = $1 } END { cmd = "curl -s http://127.0.0.1:" port "/metrics | wc -c"; cmd | getline b;
       printf "%.2f %.2f %d\n", t[5] * 1e3, t[3] * 1e3, b }')
  scrape_ms=$slowest
  echo "  scrape   slowest of 5 GET /metrics $slowest ms, median $median ms, $bytes bytes" \
    "(goal <= 100 ms: $(verdict "$slowest" 100))"
}

summary=()
for fraction in "${fractions[@]}"; do
  tag=${fraction//\//-}
  db=$work/campaign-$tag.db
  out=$work/out-$tag
  mkdir -p "$out"
  echo "=== campaign at fraction $fraction"
  "$bin"/bench_campaign_db --db "$db" --fraction "$fraction"
  rows=$(sql "SELECT (SELECT count(*) FROM scalars) + (SELECT count(*) FROM layer_values)")
  echo "  size     $(du -b "$db"* | awk '{ s += $1 } END { printf "%.1f MB", s / 1e6 }'):" \
    "$(sql "SELECT count(*) FROM scalars") metric rows, $(sql "SELECT count(*) FROM layer_values")" \
    "layer values, $(sql "SELECT count(*) FROM evals") zero-shot scores, $rows rows in all"
  if [ -n "$baseline" ]; then
    start_coordinator "$work/baseline-$tag.log" "$baseline"/bin
    baseline_pid=$coordinator_pid baseline_address=$SPHERET_COORDINATOR
    echo "  baseline $baseline: its coordinator serving in $serving_s s"
  fi
  start_coordinator "$work/coordinator-$tag.log"
  first_start=$serving_s
  read_pair paper report "${sweeps[@]}" --paper all --out "$out/paper"
  read_pair report report "${sweeps[@]}" --out "$out/report"
  read_pair results results "${sweeps[@]}"
  read_pair plot plot "${sweeps[@]}" --metric val/loss --out "$out/val_loss.png"
  read_pair plot_train plot "${sweeps[@]}" --metric train/loss --out "$out/train.png"
  read_pair plot_diag plot "${sweeps[@]}" --diag theta --out "$out/theta.png"
  read_pair watch watch 1 --plain
  echo "  coordinator peak RSS after the reads: $(awk '/VmHWM/ { printf "%.1f MB", $2 / 1024 }' \
    "/proc/$coordinator_pid/status")"
  scrape
  stop_coordinator
  if [ -n "$baseline" ]; then
    kill -TERM "$baseline_pid"
    wait "$baseline_pid" || true
    baseline_pid=
  fi
  start_coordinator "$work/coordinator-$tag.log"
  restart_s=$(awk -v a="$first_start" -v b="$serving_s" 'BEGIN { print (a > b ? a : b) }')
  echo "  restart  exec to first answered RPC: $first_start s on the written file, $serving_s s" \
    "after a SIGTERM (goal <= 5 s: $(verdict "$restart_s" 5))"
  stop_coordinator
  line=$(printf '  %-6s %9d rows:' "$fraction" "$rows")
  for read in paper report results plot plot_train plot_diag watch; do
    secs_var=seconds_$read
    line+=$(awk -v n="$read" -v s="${!secs_var}" -v r="$rows" \
      'BEGIN { printf " %s %.2f s (%.3f s/M rows),", n, s, s / (r / 1e6) }')
  done
  summary+=("$line restart ${restart_s} s, /metrics ${scrape_ms} ms")
  [ -n "$keep" ] || rm -f "$db"*
done
echo "=== time against rows (seconds, and seconds per million rows):"
printf '%s\n' "${summary[@]}"
