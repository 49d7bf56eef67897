#!/usr/bin/env bash
# The paper's whole path on two cores (`make paper-cpu`): a coordinator and a worker on loopback
# train the CPU twins of the paper's two sweeps (examples/paper/cpu/: 8 rows x xs, s-cpu x 2 seeds
# on each "corpus"), `spheret eval` scores their s-cpu models on the eleven zero-shot tasks as jobs
# on the worker, and `spheret report --paper all` writes Tables 2-5 and Figures 2-3 in the paper's
# layout (txt, md, tex, csv, json; the figures also png and svg); the LaTeX is compiled where
# pdflatex is installed.
#
#   scripts/paper_cpu.sh [BUILD_DIR] [OUT_DIR] [ZEROSHOT_DIR]
#     OUT_DIR (default runs/paper-cpu) gets the database, the logs and paper/ (the six outputs).
#     ZEROSHOT_DIR: the tasks' JSONL files (docs/zero-shot.md) under data/; by default a sample
#     drawn from the fortunes corpus (scripts/zeroshot_sample.py), whose scores only show that the
#     path works: the questions are not the benchmarks'.
#
# The twins test the path, not the paper's claims: 60 steps leave every sphere row inside the
# first collapse phase (the loss at the unigram plateau), so their tables say nothing about the
# methods. `make claims-cpu` (scripts/claims_cpu.sh) is the CPU study that tests the claims.
set -euo pipefail
build=${1:-build}
out=${2:-runs/paper-cpu}
zeroshot=${3:-zeroshot-sample}
bin=$build/bin
started=$(date +%s)
say() { echo "paper-cpu [$(($(date +%s) - started)) s]: $*"; }
say "the CPU twins test the path (training, evaluation, the six outputs), not the paper's claims:"
say "at 60 steps every sphere row is still in the collapse phase; make claims-cpu tests the claims"

mkdir -p "$out" data
rm -rf "$out"/spheret.db* "$out"/worker "$out"/checkpoints "$out"/paper
if [ ! -f data/fortunes/train.bin ]; then
  "$bin"/spheret-prepare --builtin fortunes --out data/fortunes
fi
if [ "$zeroshot" = zeroshot-sample ] && [ ! -d data/zeroshot-sample ]; then
  python3 scripts/zeroshot_sample.py data/zeroshot-sample --docs 40
fi
[ -d "data/$zeroshot" ] || { echo "paper-cpu: no zero-shot data at data/$zeroshot" >&2; exit 1; }

source scripts/local_cluster.sh
start_local_cluster "$bin" "$out" paper-cpu 1 "$(nproc)"
say "coordinator on $SPHERET_COORDINATOR (metrics on :$coordinator_metrics_port), database $out/spheret.db"

sweeps=(fineweb-edu-cpu openwebtext-cpu)
for sweep in "${sweeps[@]}"; do
  say "$("$bin"/spheret submit examples/paper/cpu/"$sweep".yaml)"
done
for sweep in "${sweeps[@]}"; do
  id=$("$bin"/spheret sweeps | awk -v name="$sweep" '$2 == name { print $1 }')
  "$bin"/spheret watch "$id" --plain  # a line per trial that starts or ends, progress every 10 s
  say "$sweep trained"
done

say "zero-shot evaluation of the s-cpu models (Tables 4-5) on data/$zeroshot"
"$bin"/spheret eval "${sweeps[@]}" --where scale=s-cpu --tasks all --data "$zeroshot"
for sweep in "${sweeps[@]}"; do
  id=$("$bin"/spheret sweeps | awk -v name="$sweep" '$2 == name { print $1 }')
  "$bin"/spheret watch "$id" --plain
done
say "evaluated"

"$bin"/spheret report "${sweeps[@]}" --paper all --out "$out"/paper
if command -v pdflatex > /dev/null; then
  for tex in "$out"/paper/*.tex; do
    name=$(basename "$tex" .tex)
    mkdir -p "$out"/paper/pdf
    printf '%s\n' '\documentclass{article}\usepackage{booktabs}\usepackage[margin=1cm,landscape]{geometry}' \
      '\begin{document}\tiny' "\\input{../$name.tex}" '\end{document}' > "$out/paper/pdf/$name.tex"
    (cd "$out"/paper/pdf && pdflatex -interaction=nonstopmode -halt-on-error "$name.tex" \
      > "$name.log" 2>&1) || { echo "paper-cpu: $tex does not compile: $out/paper/pdf/$name.log" >&2; exit 1; }
  done
  say "every .tex compiles with pdflatex ($out/paper/pdf/)"
else
  say "pdflatex not installed: the .tex files are not compiled"
fi
"$bin"/spheret report "${sweeps[@]}" --paper table2 --format md
say "done: $out/paper/ (Tables 2-5 and Figures 2-3): the path's output, not evidence about the methods"
say "(the twins stop inside the collapse phase; make claims-cpu runs the study that tests the claims)"
