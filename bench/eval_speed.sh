#!/usr/bin/env bash
# Zero-shot scoring speed of `spheret-lm eval` on CPU for the xs model (block 128, byte-level, the
# fortunes data set): HellaSwag-, PIQA- and LAMBADA-shaped requests built from fortunes text
# (600 documents, 1,400 requests), scored as eval does (batched, longest first, shared passes) and
# with one request's window per forward pass (--batch-tokens 1) as the baseline, in interleaved
# rounds on the same machine. Prints requests/s of each and the ratio (median over rounds).
# Usage: bench/eval_speed.sh [build dir] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
lm="$build/bin/spheret-lm"
[ -s data/fortunes/train.bin ] || "$lm" prepare --builtin fortunes --out data/fortunes >/dev/null 2>&1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$lm" train --config configs/demo.json --out "$out/run" --set dataset=data/fortunes \
  --set max_iters=20 --set eval_interval=20 --set eval_iters=1 >/dev/null 2>&1
python3 - "$out/zs" <<'PY'
import json, os, random, sys
root = sys.argv[1]
folder = "/usr/share/games/fortunes"  # the text the fortunes data set is made of
lines = [l.strip() for name in sorted(os.listdir(folder)) if "." not in name
         for l in open(os.path.join(folder, name), errors="ignore") if len(l.strip()) > 20]
rng = random.Random(1)
def write(task, split, docs):
    os.makedirs(os.path.join(root, task))
    with open(os.path.join(root, task, split + ".jsonl"), "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs)
pick = lambda: rng.choice(lines)
write("hellaswag", "validation", [{"activity_label": "Fortune", "ctx_a": pick(), "ctx_b": pick(),
      "endings": [pick() for _ in range(4)], "label": str(i % 4)} for i in range(200)])
write("piqa", "validation", [{"goal": pick(), "sol1": pick(), "sol2": pick(), "label": i % 2}
                             for i in range(200)])
write("lambada_openai", "test", [{"text": " ".join(pick() for _ in range(3))} for i in range(200)])
PY
[ -s "$out/zs/hellaswag/validation.jsonl" ] || { echo "eval bench: no fortunes text" >&2; exit 1; }
for round in $(seq "$rounds"); do
  for mode in batched one_per_pass; do
    flags=()
    [ "$mode" = one_per_pass ] && flags=(--batch-tokens 1)
    rate=$("$lm" eval --run "$out/run" --tasks hellaswag,piqa,lambada_openai --data "$out/zs" \
      --bootstrap-iters 0 "${flags[@]}" 2>&1 >/dev/null |
      sed -n 's/.*passes ([0-9]* requests.*, \([0-9.]*\) requests\/s on .*/\1/p' | tail -1)
    echo "$round $mode $rate" >> "$out/figures"
  done
done
python3 - "$out/figures" "$rounds" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, mode, rate = line.split()
    runs[r][mode] = float(rate)
best = {m: max(run[m] for run in runs.values()) for m in ("batched", "one_per_pass")}
ratio = statistics.median(run["batched"] / run["one_per_pass"] for run in runs.values())
print(f"zero-shot eval, xs model on CPU, {sys.argv[2]} rounds, 1,400 requests (HellaSwag, PIQA, "
      f"LAMBADA shapes):")
print(f"  batched (eval's default)   {best['batched']:8.1f} requests/s")
print(f"  one window per pass        {best['one_per_pass']:8.1f} requests/s")
print(f"  batched / one per pass     {ratio:8.2f}x (median over rounds)")
PY
