#!/usr/bin/env bash
# Installs what is missing: Debian packages with apt-get and, unless LibTorch comes from elsewhere,
# the torch and pyarrow wheels into .venv. The two run side by side (apt unpacks Debian packages
# while pip unpacks the 5 GB of wheels; each uses one core), and each says how long it took.
#   scripts/install_deps.sh "DEBIAN_PACKAGE ..." [TORCH_VERSION PYARROW_VERSION]
# Called by the Makefile's deps goals; SUDO (empty as root) prefixes apt-get.
set -uo pipefail
packages=$1 torch=${2:-} pyarrow=${3:-}
py=.venv/bin/python
sudo=${SUDO:-}

missing=()
for p in $packages; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

apt_install() {  # apt_install PACKAGE...
  local start=$SECONDS
  echo "deps: installing Debian packages: $*"
  $sudo apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@" ||
    return 1
  echo "deps: Debian packages installed in $((SECONDS - start)) s"
}

wheels_needed() {
  [ -n "$torch" ] || return 1
  "$py" -c "import torch, pyarrow, sys; sys.exit(torch.__version__.split('+')[0] != '$torch' or pyarrow.__version__ != '$pyarrow')" 2>/dev/null && return 1
  return 0
}

# The wheels. --no-compile: LibTorch's C++ side needs no .pyc (Python compiles what a test
# imports on first use).
install_wheels() {
  local start=$SECONDS
  if ! "$py" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch')" 2>/dev/null; then
    echo "deps: installing torch==$torch into .venv (LibTorch for the trainer, about 5 GB)"
    if ! { python3 -m venv .venv && "$py" -m pip install -q --no-cache-dir --no-compile "torch==$torch"; }; then
      echo "deps: pip could not install torch==$torch into .venv;" \
        "free space here: $(df -h --output=avail . | tail -1 | tr -d ' ')" >&2
      return 1
    fi
  fi
  if ! "$py" -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '$pyarrow')" 2>/dev/null; then
    echo "deps: installing pyarrow==$pyarrow into .venv (Arrow's Parquet reader, about 170 MB)"
    "$py" -m pip install -q --no-cache-dir --no-compile "pyarrow==$pyarrow" ||
      echo "deps: pip could not install pyarrow==$pyarrow; building without Parquet input" >&2
  fi
  echo "deps: wheels installed in $((SECONDS - start)) s"
}

if ! wheels_needed; then
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  exit
fi
# pip needs a Python with venv (Debian's python3-venv) before it can start.
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  apt_install python3-venv || exit 1
  missing=("${missing[@]/python3-venv/}")
fi
log=$(mktemp "${TMPDIR:-/tmp}/spheret-wheels.XXXXXX")
install_wheels > "$log" 2>&1 &
wheels=$!
apt_status=0
rest=$(printf '%s ' "${missing[@]}" | tr -s ' ')
[ -z "${rest// /}" ] || apt_install $rest || apt_status=$?
wait "$wheels"
wheels_status=$?
cat "$log"
rm -f "$log"
[ "$apt_status" -eq 0 ] || { echo "deps: apt-get could not install: $rest" >&2; exit 1; }
exit "$wheels_status"
