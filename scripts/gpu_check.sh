#!/usr/bin/env bash
# GPU checks, for a host with a CUDA PyTorch/LibTorch, nvcc and CMake (no gRPC needed). Builds the
# trainer with SPHERET_TRAINER_ONLY=ON against the host's LibTorch, runs the CUDA kernel tests when a
# GoogleTest is available (GTEST_SRC: a googletest source tree, e.g. Debian's /usr/src/googletest),
# and a short bf16 training run on the GPU. Results go to $OUT (or ./gpu-check).
#   scripts/gpu_check.sh
set -euo pipefail
out=${OUT:-gpu-check}
mkdir -p "$out"
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
gtest_flags=()
if [ -n "${GTEST_SRC:-}" ]; then
  cmake -S "$GTEST_SRC" -B /tmp/gtest-build -DCMAKE_INSTALL_PREFIX=/tmp/gtest -DBUILD_GMOCK=OFF > /dev/null
  cmake --build /tmp/gtest-build -j --target install > /dev/null
  gtest_flags=(-DGTest_ROOT=/tmp/gtest)
fi
cmake -S . -B build-gpu -DSPHERET_TRAINER_ONLY=ON -DSPHERET_CUDA=ON -DCMAKE_PREFIX_PATH="$prefix" \
  "${gtest_flags[@]}" 2>&1 | tail -3
cmake --build build-gpu -j "$(nproc)" 2>&1 | tail -3
if [ -x build-gpu/bin/nn_test ]; then
  build-gpu/bin/nn_test 2>&1 | tee "$out/nn_test.txt" | tail -5
fi
build-gpu/bin/spheret-lm prepare --builtin fortunes --out data/fortunes 2>/dev/null \
  || build-gpu/bin/spheret-lm prepare --input README.md --out data/fortunes
for method in pre_ln geonorm p_spheret; do
  build-gpu/bin/spheret-lm train --config configs/demo.json --out "runs/gpu-$method" \
    --set device=cuda --set dtype=bfloat16 --set method=$method --set p=0.5 --set diag_interval=100 \
    > "$out/$method.jsonl" 2> "$out/$method.log"
  tail -1 "$out/$method.jsonl"
done
