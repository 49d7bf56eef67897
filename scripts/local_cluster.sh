# Sourced by scripts/demo.sh, paper_cpu.sh and claims_cpu.sh: a coordinator and one worker on
# loopback, both stopped (SIGTERM, then waited for) when the calling script exits. A caller with
# an EXIT trap of its own keeps it, and calls stop_local_cluster in it.
#
#   start_local_cluster BIN OUT WORKER_ID CPU_SLOTS THREADS_PER_SLOT
#     BIN: the programs' folder; OUT: gets spheret.db, coordinator.{out,log}, worker.log, worker/
#     and checkpoints/; the worker reads data sets under data/.
#   Exports SPHERET_COORDINATOR (127.0.0.1:PORT) and sets coordinator_metrics_port.
local_cluster_pids=()
stop_local_cluster() {
  for pid in "${local_cluster_pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
}

start_local_cluster() {
  local bin=$1 out=$2 worker_id=$3 slots=$4 threads=$5 port
  [ -n "$(trap -p EXIT)" ] || trap stop_local_cluster EXIT
  "$bin"/spheret-coordinator --db "$out"/spheret.db --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 > "$out"/coordinator.out 2> "$out"/coordinator.log &
  local_cluster_pids+=($!)
  for _ in $(seq 100); do
    [ -s "$out"/coordinator.out ] && break
    sleep 0.1
  done
  # The coordinator's first line: "listening PORT metrics PORT".
  read -r _ port _ coordinator_metrics_port < "$out"/coordinator.out ||
    { echo "the coordinator did not start; see $out/coordinator.log" >&2; return 1; }
  export SPHERET_COORDINATOR=127.0.0.1:$port
  "$bin"/spheret-worker --coordinator "$SPHERET_COORDINATOR" --cpu-slots "$slots" \
    --threads-per-slot "$threads" --worker-id "$worker_id" --work-dir "$out"/worker \
    --checkpoint-root "$out"/checkpoints --data-root data --lm "$bin"/spheret-lm \
    --metrics-listen 127.0.0.1:0 2> "$out"/worker.log &
  local_cluster_pids+=($!)
}
