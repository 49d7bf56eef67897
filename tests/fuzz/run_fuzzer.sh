#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its corpus (ctest label fuzz).
#   run_fuzzer.sh FUZZER CORPUS SECONDS [SEED_DIR...] [-- LIBFUZZER_FLAG...]
# Flags after `--` go to libFuzzer as they are (tests/fuzz/CMakeLists.txt passes each target's
# -dict= and -max_len= there).
# New inputs go to a scratch folder, never into the source tree. On a crash it prints the input
# (hex) and where it was kept: add that file to CORPUS (the replay test then keeps it fixed).
set -euo pipefail
fuzzer=$(realpath "$1") corpus=$(realpath "$2") seconds=$3
if [ ! -x "$fuzzer" ]; then
  echo "run_fuzzer: $fuzzer is not built: the libFuzzer targets build with \`make test-all\`" \
    "(or cmake --build build --target spheret_libfuzzer)" >&2
  exit 1
fi
shift 3
seeds=() flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do seeds+=("$(realpath "$1")"); shift; done
[ $# -gt 0 ] && shift
flags=("$@")
# Leaks inside other projects' code (tests/fuzz/lsan.supp says which and why) are not ours.
export LSAN_OPTIONS="suppressions=$(dirname "$(realpath "$0")")/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
work=$(mktemp -d "${TMPDIR:-/tmp}/spheret_fuzz.XXXXXX")
trap 'rm -rf "$work/new"' EXIT
mkdir -p "$work/new"
cd "$work"
status=0
# -timeout: an input slower than 10 s is a hang; -rss_limit_mb: one above 2 GiB a memory bomb.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "${flags[@]}" "$work/new" "$corpus" "${seeds[@]}" 2>&1 | tail -n 40 || status=$?
if [ "$status" -ne 0 ]; then
  for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$crash" ] || continue
    echo "run_fuzzer: $(basename "$fuzzer") failed on $crash:"
    od -An -tx1 -v "$crash" | head -n 20
  done
  exit "$status"
fi
rm -rf "$work"
