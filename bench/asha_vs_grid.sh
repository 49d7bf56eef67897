#!/usr/bin/env bash
# ASHA against the full grid it searches, on this machine: the same 3 methods x 9 learning rates
# (drawn log-uniformly from 1e-4..3e-2 per method, the same draws in both sweeps) on xs and the
# built-in fortunes data, max_iters 300; the grid trains every trial to the end, ASHA (min_iters 30,
# eta 3: rungs at 30, 90, 270, grouped by method) stops the losers. Prints the trainer steps ASHA
# used against the grid's (goal <= 40%) and, per method, the full-budget val/loss of ASHA's pick
# against the grid's best (goal: within 0.02).
#
#   bench/asha_vs_grid.sh [BUILD_DIR] [OUT_DIR] [--quick]
#     --quick: 2 methods x 4 learning rates, max_iters 90, min_iters 10 (a minute or two; checks
#     the path, its figures mean little)
#     SEED=N (environment, default 0): the search's seed, which draws the learning rates
# Steps are what the trainers ran (each trial's last logged step, log_interval 1), so a pruned
# trial counts the steps it trained after its rung until the stop reached it (the coordinator's
# heartbeat: --lease-ttl 3 makes it 1 s here).
set -euo pipefail
build=${1:-build}
out=${2:-runs/bench-asha}
quick=${3:-}
bin=$build/bin
methods="[pre_ln, geonorm, p_spheret]"; samples=9; max_iters=300; min_iters=30; eval_interval=30
if [ "$quick" = --quick ]; then
  methods="[pre_ln, geonorm]"; samples=4; max_iters=90; min_iters=10; eval_interval=10
fi
mkdir -p "$out" data
rm -rf "$out"/spheret.db* "$out"/worker "$out"/checkpoints
[ -f data/fortunes/train.bin ] || "$bin"/spheret-lm prepare --builtin fortunes --out data/fortunes

sweep_file() {  # NAME STRATEGY: the two sweeps differ only in name and strategy
  cat << YAML
name: $1
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {scale: xs, block_size: 128, batch_size: 12, gradient_accumulation_steps: 1, min_lr: 1e-5,
       warmup_iters: $min_iters, lr_decay_iters: $max_iters, max_iters: $max_iters, beta2: 0.99,
       eval_interval: $eval_interval, eval_iters: 20, log_interval: 1}
parameters:
  method: {values: $methods}
  p: {values: [2], only_for: {method: p_spheret}}
  learning_rate: {distribution: loguniform, min: 1e-4, max: 3e-2}
search: {strategy: $2, samples: $samples, group_by: [method], seed: ${SEED:-0}$3}
resources: {gpus: 0, cpu_slots: 1}
YAML
}
sweep_file grid random "" > "$out"/grid.yaml
sweep_file asha asha ", min_iters: $min_iters, reduction_factor: 3" > "$out"/asha.yaml

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
}
trap cleanup EXIT
"$bin"/spheret-coordinator --db "$out"/spheret.db --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --lease-ttl 3 \
  > "$out"/coordinator.out 2> "$out"/coordinator.log &
pids+=($!)
for _ in $(seq 100); do [ -s "$out"/coordinator.out ] && break; sleep 0.1; done
read -r _ port _ < "$out"/coordinator.out
export SPHERET_COORDINATOR=127.0.0.1:$port
"$bin"/spheret-worker --coordinator "$SPHERET_COORDINATOR" --cpu-slots 2 --threads-per-slot 1 \
  --worker-id bench --work-dir "$out"/worker --checkpoint-root "$out"/checkpoints \
  --data-root data --lm "$bin"/spheret-lm 2> "$out"/worker.log &
pids+=($!)

for name in grid asha; do
  started=$(date +%s)
  sweep=$("$bin"/spheret submit "$out"/$name.yaml | sed -E 's/^sweep ([0-9]+):.*/\1/')
  "$bin"/spheret watch --plain "$sweep" > "$out"/$name.watch
  echo "bench: $name sweep $sweep ended in $(( $(date +%s) - started )) s"
done

sql() { "$bin"/spheret sql --db "$out"/spheret.db --format csv "$1" | tail -n +2; }
# Steps each sweep's trainers ran, and its trials by state.
steps() {
  sql "SELECT sum(r.last_step) FROM trial_results r JOIN sweeps s USING (sweep_id)
       WHERE s.name = '$1' AND r.metric = 'train/loss'"
}
grid_steps=$(steps grid); asha_steps=$(steps asha)
echo "bench: trials by state: $(sql "SELECT s.name || ' ' || t.state || ' ' || count(*) FROM trials t
  JOIN sweeps s USING (sweep_id) GROUP BY s.name, t.state" | tr '\n' ';')"
awk -v a="$asha_steps" -v g="$grid_steps" 'BEGIN {
  printf "asha: trainer steps %d of the grid'\''s %d = %.1f%% (goal <= 40%%)\n", a, g, 100 * a / g }'
# Per method: the best SUCCEEDED trial of each sweep by its final val/loss (ASHA's pick, the grid's
# best), and the full-budget val/loss of ASHA's pick (the same config trains identically in the
# grid, so its grid trial's final value is the full-budget value).
sql "WITH final AS (
       SELECT s.name AS sweep, json_extract(r.config_json, '$.method') AS method,
              json_extract(r.config_json, '$.learning_rate') AS lr, r.last AS loss
       FROM trial_results r JOIN sweeps s USING (sweep_id)
       WHERE r.metric = 'val/loss' AND r.state = 'SUCCEEDED' AND r.last_step = $max_iters),
     pick AS (SELECT method, lr, min(loss) AS loss FROM final WHERE sweep = 'asha' GROUP BY method),
     best AS (SELECT method, lr, min(loss) AS loss FROM final WHERE sweep = 'grid' GROUP BY method)
     SELECT p.method, p.lr, p.loss, b.lr, b.loss, p.loss - b.loss
     FROM pick p JOIN best b USING (method) ORDER BY p.method" |
  awk -F, '{ printf "asha: %-10s pick lr %-9.4g val/loss %.4f; grid best lr %-9.4g val/loss %.4f; difference %+.4f (goal <= 0.02)\n", $1, $2, $3, $4, $5, $6 }'
