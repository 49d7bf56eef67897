#!/usr/bin/env bash
# The Dockerfile's steps without a container daemon: install.sh from BUILD_DIR into a scratch
# prefix (the build stage), then each program started with only the base system and that prefix
# (LD_LIBRARY_PATH=PREFIX/lib, the runtime stage): it must load and print its --help. Also checks
# that the Dockerfile still calls install.sh and runs as the non-root user.
#   deploy/docker/check.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: check.sh BUILD_DIR}" && pwd)
prefix=$(mktemp -d "$build/docker-check.XXXXXX")  # beside the build: hard links work
trap 'rm -rf "$prefix"' EXIT
grep -q 'deploy/docker/install.sh build /opt/spheret' "$here/Dockerfile" \
  || { echo "check.sh: the Dockerfile no longer runs install.sh" >&2; exit 1; }
grep -q '^USER 10001' "$here/Dockerfile" || { echo "check.sh: the image must not run as root" >&2; exit 1; }
# Every make target the Dockerfile runs exists (make -n prints a recipe without running it).
for target in $(grep -oE '(RUN|&&) make [a-z][a-z-]*' "$here/Dockerfile" | awk '{print $3}'); do
  make -s -n -C "$here/../.." "$target" > /dev/null 2>&1 \
    || { echo "check.sh: the Dockerfile runs 'make $target', which the Makefile lacks" >&2; exit 1; }
done
SPHERET_INSTALL_LINKS=1 "$here/install.sh" "$build" "$prefix"
for program in spheret-coordinator spheret-worker spheret-lm spheret; do
  # No RPATH into the build tree or the virtual environment may be what makes it load.
  if ! env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$prefix/lib" \
      "$prefix/bin/$program" --help > "$prefix/$program.help" 2>&1; then
    echo "check.sh: $program does not start from the installed prefix:" >&2
    cat "$prefix/$program.help" >&2
    exit 1
  fi
  # Every library resolves from the prefix or the base system, none through the RUNPATH the build
  # left (the build tree, the virtual environment): the image has neither.
  outside=$(env -i LD_LIBRARY_PATH="$prefix/lib" ldd "$prefix/bin/$program" \
    | awk '$2 == "=>" {print $3}' | grep -v -e "^$prefix/lib/" -e '^/lib/' -e '^/usr/lib/' || true)
  [ -z "$outside" ] || { echo "check.sh: $program loads from outside the prefix: $outside" >&2; exit 1; }
done
echo "check.sh: 4 programs start from $(du -sh "$prefix" | cut -f1) of programs and libraries"
