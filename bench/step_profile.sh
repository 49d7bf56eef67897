#!/usr/bin/env bash
# Where a training step's time goes, per kind of operation, in spheret-lm and in the nanoGPT/PyTorch
# reference (bench/torch_reference.py) on the same model: both under `perf record` (Debian's
# linux-perf; not installed by `make deps`), at a preset and thread count, ITERS iterations each;
# the samples of each process grouped by the symbol's kind (matmul, attention, LayerNorm, ...), as
# shares of the process from its 4th second on (past the start-ups; so ITERS must run well past it).
# PEER `compile` profiles nanoGPT with torch.compile instead of eager: a first short run fills
# inductor's cache, and the profiled run's samples count from its 15th second on (past the cached
# compile; ITERS must run well past that). Each share is also printed in milliseconds of a step: the
# share times the program's own step time (spheret-lm's median tokens_per_sec event from step 20,
# the reference's median iteration), both measured in these profiled runs. docs/performance.md
# quotes it.
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
  --threads "$threads" > "$out/torch.out" 2>&1
for program in spheret torch; do
  perf report -q -i "$out/$program.data" --no-children --sort dso,symbol -g none 2> /dev/null |
    sed -n 's/^ *\([0-9.]*\)% *\(.*\) *\[.\] *\(.*\)$/\1\t\2 \3/p' > "$out/$program.tsv"
done

python3 - "$out/spheret.tsv" "$out/torch.tsv" "$preset" "$threads" "$iters" "$peer" "$out" <<'PY'
import json, re, statistics, sys
KINDS = [  # first match wins, on "library symbol"
    ("Python interpreter", r"^libpython"),
    ("torch.compile's generated C++ (inductor)", r"^c[a-z0-9]{20,}\.so |torchinductor"),
    ("JIT-generated code (oneDNN's GELU, MKL)", r"^\[JIT\]"),
    ("operating system kernel", r"^\[kernel"),
    ("matmul (MKL sgemm)", r"mkl_blas|sgemm|gemm"),
    ("attention (flash, fwd+bwd)", r"flash_attention"),
    ("LayerNorm", r"LayerNorm|RowwiseMoments|layer_norm"),
    ("GELU", r"[Gg]elu|erf"),
    ("softmax + cross-entropy", r"softmax|nll_loss|cross_entropy"),
    ("AdamW + clip", r"adam|_foreach|norm_kernel|NormTwo|norm_two"),
    ("spheret's fused attention (softmax rows; its products are in matmul)",
     r"SoftmaxRows|SoftmaxBackwardRows|ScaleRows|CausalAttention"),
    ("spheret's fused update + LayerNorm", r"NormBlock|UpdateNorm|ScaleNormFused"),
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
preset, threads, iters, peer, out = sys.argv[3:]
config = json.load(open(f"{out}/run/config.json"))
tokens = config["batch_size"] * config["block_size"] * config["gradient_accumulation_steps"]
rates = [e["value"] for e in map(json.loads, open(f"{out}/run/events.jsonl"))
         if e.get("name") == "tokens_per_sec" and e.get("step", 0) >= 20]
ref = re.search(r"torch reference: ([0-9.]+) tokens/s", open(f"{out}/torch.out").read())
if not rates or not ref:
    sys.exit("step_profile: no step time from spheret-lm's events or the reference's output")
ms = {"ours": 1e3 * tokens / statistics.median(rates), "theirs": 1e3 * tokens / float(ref.group(1))}
print(f"where the time goes, preset {preset}, {threads} thread(s), {iters} iterations (perf "
      f"samples from spheret-lm's 4th second on and PyTorch's "
      f"{'15th' if peer == 'compile' else '4th'}: % of the process's samples, and that share of "
      f"its step in ms)")
print(f"step: spheret-lm {ms['ours']:.2f} ms, PyTorch {peer} {ms['theirs']:.2f} ms "
      f"({ms['theirs'] / ms['ours']:.2f}x), {tokens} tokens a step")
print(f"{'kind':<70} {'spheret-lm % / ms':>18} {'PyTorch ' + peer + ' % / ms':>22}")
for kind in ours:
    print(f"{kind:<70} {ours[kind]:>9.1f} {ours[kind] * ms['ours'] / 100:>8.2f} "
          f"{theirs[kind]:>13.1f} {theirs[kind] * ms['theirs'] / 100:>8.2f}")
PY
