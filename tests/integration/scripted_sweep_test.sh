#!/usr/bin/env bash
# Issue 46: the example sweep of researchers' own connections (examples/connections/) through a
# coordinator and a worker on loopback, then `spheret report`: the scripted rows stand beside
# Pre-LN and GeoNorm with statistics and geometry. A re-submit finds its trials; a changed
# connection file makes new ones.
#   scripted_sweep_test.sh BIN_DIR SOURCE_DIR PYTHON [full]
#   (full: the example's own 300 iterations; default: 20, the same sweep otherwise)
set -euo pipefail
bin=$(cd "$1" && pwd) src=$(cd "$2" && pwd) python=$3 mode=${4:-short}
fail() { echo "FAIL: $*" >&2; exit 1; }
"$python" -c "import torch, yaml" 2> /dev/null || { echo "skip: no torch/yaml in $python"; exit 77; }
work=$(mktemp -d)
trap 'stop_local_cluster 2> /dev/null || true; rm -rf "$work"' EXIT
cd "$work"
mkdir -p sweep data
"$bin"/spheret-lm prepare --builtin fortunes --out data/fortunes > /dev/null 2>&1 ||
  fail "spheret-lm prepare --builtin fortunes"
"$python" "$src"/examples/connections/connections.py sweep > /dev/null
"$python" - "$src"/examples/connections/sweep.yaml sweep/sweep.yaml "$mode" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))
if sys.argv[3] != "full":  # the same sweep, shorter: 20 iterations of 64 tokens
    spec["base"].update(block_size=64, batch_size=8, max_iters=20, lr_decay_iters=20,
                        warmup_iters=5, eval_interval=10, eval_iters=4, log_interval=5,
                        diag_interval=10)
yaml.safe_dump(spec, open(sys.argv[2], "w"), sort_keys=False)
PY
source "$src"/scripts/local_cluster.sh
start_local_cluster "$bin" "$work" scripted-worker 2 1
submitted=$("$bin"/spheret submit sweep/sweep.yaml) || fail "submit"
echo "$submitted"
[[ $submitted == *": 10 trials, 10 new"* ]] || fail "expected 10 new trials: $submitted"
sweep=$(echo "$submitted" | sed -E 's/^sweep ([0-9]+):.*/\1/')
timeout 600 "$bin"/spheret watch "$sweep" > watch.txt || fail "watch: $(tail -5 watch.txt)"
"$bin"/spheret trials --sweep "$sweep" --state SUCCEEDED > trials.txt
[ "$(grep -c SUCCEEDED trials.txt)" = 10 ] || fail "not every trial SUCCEEDED: $("$bin"/spheret trials --sweep "$sweep")"

"$bin"/spheret report "$sweep" --out report > report.txt || fail "report: $(cat report.txt)"
readme=report/README.md
cat "$readme"
for row in pre_ln geonorm scripted:pre_ln_residual scripted:rezero scripted:dyt_residual; do
  # Statistics: every row's cells are mean ± std [95% CI] over its 2 seeds.
  # (a scripted row is scripted:STEM@HASH: the first 8 hex digits of its file's SHA-256)
  grep -E "^\| *$row(@[0-9a-f]{8})? *\|.*±.*\[.*\].*\(2\)" "$readme" > /dev/null ||
    fail "no row '$row' with mean ± std [CI] (2 seeds) in $readme"
done
[ -s report/geometry.csv ] || fail "no geometry.csv: $(ls report)"
for row in scripted:rezero scripted:dyt_residual geonorm; do
  grep -q "$row" report/geometry.csv || fail "no geometry rows for $row in geometry.csv"
done
again=$("$bin"/spheret submit sweep/sweep.yaml)
[[ $again == *": 10 trials, 0 new"* ]] || fail "the same files made new trials: $again"
# ReZero with another initial alpha: its 2 trials are new, the other 8 are found again.
"$python" - "$src"/examples/connections sweep/rezero.pt <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1])
from connections import ReZero
module = ReZero()
module.alpha.data.fill_(0.25)
torch.jit.script(module).save(sys.argv[2])
PY
resubmitted=$("$bin"/spheret submit sweep/sweep.yaml)
[[ $resubmitted == *" trials, 2 new"* ]] || fail "a changed file should make 2 new trials: $resubmitted"
"$bin"/spheret cancel "$(echo "$resubmitted" | sed -E "s/^sweep ([0-9]+):.*/\\1/")" > /dev/null
echo "ok: the scripted connections ran through coordinator and worker, reported beside the built-in ones"
