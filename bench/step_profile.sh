#!/usr/bin/env bash
# Where a training step's time goes, per kind of operation, in spheret-lm and in the nanoGPT/PyTorch
# reference (bench/torch_reference.py) on the same model: both under `perf record` (Debian's
# linux-perf; not installed by `make deps`), at a preset and thread count, ITERS iterations each;
# the samples of each process grouped by the symbol's kind (matmul, attention, LayerNorm, ...), as
# shares of the process from its 4th second on (past the start-ups; so ITERS must run well past it).
# PEER `compile` profiles nanoGPT with torch.compile instead of eager: a first short run fills
# inductor's cache, and the profiled run's samples count from its 15th second on (past the cached
# compile; ITERS must run well past that). docs/performance.md quotes it.
# Usage: bench/step_profile.sh [build dir] [preset xs] [threads 1] [iters 200] [peer eager|compile]
set -euo pipefail
build=${1:-build}
preset=${2:-xs}
threads=${3:-1}
iters=${4:-200}
peer=${5:-eager}
case $peer in
  eager) peer_flags=(); peer_delay=4000 ;;
  compile) peer_flags=(--compile); peer_delay=15000 ;;
  *) echo "step_profile: PEER is eager or compile, not '$peer'" >&2; exit 2 ;;
esac
command -v perf > /dev/null || { echo "step_profile: needs perf (apt-get install linux-perf)" >&2; exit 1; }
[ -s data/fortunes/train.bin ] || "$build/bin/spheret-lm" prepare --builtin fortunes --out data/fortunes 2>/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

OMP_NUM_THREADS=$threads perf record -q -D 4000 -F 999 -o "$out/spheret.data" "$build/bin/spheret-lm" train \
  --config configs/demo.json --out "$out/run" --set dataset=data/fortunes --set scale="$preset" \
  --set max_iters="$iters" --set eval_interval="$iters" --set eval_iters=5 > /dev/null 2>&1
export PYTHONWARNINGS=ignore
[ "$peer" = eager ] || .venv/bin/python bench/torch_reference.py "${peer_flags[@]}" --data data/fortunes \
  --preset "$preset" --iters 25 --eval-iters 1 --threads "$threads" > /dev/null 2>&1
perf record -q -D "$peer_delay" -F 999 -o "$out/torch.data" .venv/bin/python bench/torch_reference.py \
  "${peer_flags[@]}" --data data/fortunes --preset "$preset" --iters "$iters" --eval-iters 5 \
  --threads "$threads" > /dev/null 2>&1
for program in spheret torch; do
  perf report -q -i "$out/$program.data" --no-children --sort dso,symbol -g none 2> /dev/null |
    sed -n 's/^ *\([0-9.]*\)% *\(.*\) *\[.\] *\(.*\)$/\1\t\2 \3/p' > "$out/$program.tsv"
done

python3 - "$out/spheret.tsv" "$out/torch.tsv" "$preset" "$threads" "$iters" "$peer" <<'PY'
import re, sys
KINDS = [  # first match wins, on "library symbol"
    ("Python interpreter", r"^libpython"),
    ("torch.compile's generated C++ (inductor)", r"^c[a-z0-9]{20,}\.so |torchinductor"),
    ("JIT-generated code (MKL/oneDNN)", r"^\[JIT\]"),
    ("operating system kernel", r"^\[kernel"),
    ("matmul (MKL sgemm)", r"mkl_blas|sgemm|gemm"),
    ("attention (flash, fwd+bwd)", r"flash_attention"),
    ("LayerNorm", r"LayerNorm|RowwiseMoments|layer_norm"),
    ("GELU", r"[Gg]elu|erf"),
    ("softmax + cross-entropy", r"softmax|nll_loss|cross_entropy"),
    ("AdamW + clip", r"adam|_foreach|norm_kernel|NormTwo|norm_two"),
    ("sphere update (fused CPU loop)", r"Sphere|sphere_fused|ForwardRow|BackwardRow"),
    ("other tensor kernels", r"at::native|Sleef|VectorizedLoop|vectorized|TensorIterator|c10::function_ref"),
    ("malloc/free, page faults", r"malloc|free|_int_|unlink_chunk|consolidate|mmap|page_fault|clear_page|memset|memmove|memcpy"),
]
REST = "the rest (dispatch, autograd, libraries' start-up)"
def shares(path):
    total = {name: 0.0 for name, _ in KINDS}
    total[REST] = 0.0
    for line in open(path):
        pct, sym = line.rstrip("\n").split("\t", 1)
        kind = next((name for name, rx in KINDS if re.search(rx, sym)), None)
        total[kind or REST] += float(pct)
    return total
ours, theirs = shares(sys.argv[1]), shares(sys.argv[2])
preset, threads, iters, peer = sys.argv[3:]
print(f"where the time goes, preset {preset}, {threads} thread(s), {iters} iterations "
      f"(perf samples from the 4th second on, %)")
print(f"{'kind':<50} {'spheret-lm':>10} {'PyTorch ' + peer:>16}")
for kind in ours:
    print(f"{kind:<50} {ours[kind]:>10.1f} {theirs[kind]:>16.1f}")
PY
