#!/usr/bin/env bash
# What the geometry costs (docs/methods.md §2): the step time of p_spheret with the diag
# measurements (Proposition 6's probe, token collapse) and with the update Jacobians on every
# step, against the plain step, in one process (`spheret-lm bench`: a step of each in turn), at
# preset xs with ONE sequence per step, so each figure is the cost per sequence of training.
# Then the share of step time the paper sweeps' intervals cost (examples/paper/: diag every 250,
# Jacobians every 2,500, steps of 128 sequences): the extra time of a measured step, divided by
# the interval times 128 sequences' step time. This extrapolation assumes that a training step's
# time grows with its sequences and the probe's does not (it measures one sequence, and its
# Lanczos steps do not depend on the depth: each is one product through every update).
# Usage: bench/diag_cost.sh [build dir] [steps] [diag interval] [jacobian interval] [sequences]
set -euo pipefail
build=${1:-build}
steps=${2:-20}
diag=${3:-250}
jac=${4:-2500}
seqs=${5:-128}
[ -s data/fortunes/train.bin ] || "$build/bin/spheret-lm" prepare --builtin fortunes --out data/fortunes 2>/dev/null
table=$(OMP_NUM_THREADS=$(nproc) "$build/bin/spheret-lm" bench --config configs/demo.json \
  --set dataset=data/fortunes --set block_size=128 --set batch_size=1 \
  --set gradient_accumulation_steps=1 --set jacobian_iters=20 --steps "$steps" --warmup 3 \
  --methods p_spheret,p_spheret+diag_interval=1,p_spheret+jacobian_interval=1 2>/dev/null)
echo "$table"
echo "$table" | awk -v diag="$diag" -v jac="$jac" -v seqs="$seqs" '
  $1 == "p_spheret" { base = $2 }
  $1 == "p_spheret+diag_interval=1" { d = $2 }
  $1 == "p_spheret+jacobian_interval=1" { j = $2 }
  END {
    printf "one diag step costs %.1f plain one-sequence steps, one Jacobian step %.1f\n",
           (d - base) / base, (j - base) / base
    share_d = (d - base) / (base * seqs * diag)
    share_j = (j - base) / (base * seqs * jac)
    total = 100 * (share_d + share_j)
    printf "at diag_interval %d and jacobian_interval %d with %d sequences per step: %.2f%% + %.2f%% = %.2f%% of step time\n",
           diag, jac, seqs, 100 * share_d, 100 * share_j, total
    printf "diagnostics at the paper sweeps'"'"' intervals: %.2f%% of step time (goal <= 3%%: %s)\n",
           total, total <= 3 ? "met" : "not met"
  }'
