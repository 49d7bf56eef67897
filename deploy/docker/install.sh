#!/usr/bin/env bash
# Installs spheret's four programs from a build folder into PREFIX (PREFIX/bin) with every shared
# library they load that is not part of the base system (PREFIX/lib: LibTorch and its CUDA
# libraries from the wheel, gRPC, protobuf, abseil, ...), so that PREFIX runs on a bare Debian
# with LD_LIBRARY_PATH=PREFIX/lib. The Dockerfile's build stage runs it; check.sh runs it here.
#   deploy/docker/install.sh BUILD_DIR PREFIX
set -euo pipefail
build=${1:?usage: install.sh BUILD_DIR PREFIX}
prefix=${2:?usage: install.sh BUILD_DIR PREFIX}
programs=(spheret-coordinator spheret-worker spheret-lm spheret)
mkdir -p "$prefix/bin" "$prefix/lib"
for program in "${programs[@]}"; do
  [ -x "$build/bin/$program" ] || { echo "install.sh: no $build/bin/$program (build first)" >&2; exit 1; }
  install -m 0755 "$build/bin/$program" "$prefix/bin/$program"
done
# The libraries each program resolves, minus glibc's own (the base image has those; copying them
# would mix two C libraries).
for program in "${programs[@]}"; do
  ldd "$build/bin/$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libresolv.so.*) ;;
    *) if [ "${SPHERET_INSTALL_LINKS:-0}" = 1 ]; then  # check.sh: hard links, not 3 GB of copies
         ln -f "$(readlink -f "$lib")" "$prefix/lib/$(basename "$lib")" 2>/dev/null \
           || cp -L "$lib" "$prefix/lib/"
       else
         cp -L "$lib" "$prefix/lib/"
       fi ;;
  esac
done
echo "install.sh: ${#programs[@]} programs and $(find "$prefix/lib" -type f | wc -l) libraries in $prefix"
