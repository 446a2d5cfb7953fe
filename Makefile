# Two commands do everything on a fresh machine:
#   make regress   - create .venv, install nvdla-hil, run the regression on the model target
#   make test      - run the project's own test suite
# Both find NVDLA's trace tests in ../shared/nvdla/trace_tests/nv_small (override NVDLA_TRACES=...).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,sim,lab,cluster,results
NVDLA_TRACES ?= $(abspath ../shared/nvdla/trace_tests/nv_small)
export NVDLA_TRACES
NVDLA_TRACE_SETS ?= $(abspath ../shared/nvdla/trace_tests)
export NVDLA_TRACE_SETS
NVDLA_TXN_TESTS ?= $(abspath ../shared/nvdla/traceplayer_v1)
export NVDLA_TXN_TESTS
# NVDLA's software regression (loadables + golden dumps) and the nvdla/sw checkout whose firmware
# runs them (README "Loadables"); each is used only when it is there
NVDLA_LOADABLES ?= $(wildcard $(abspath ../shared/nvdla_sw))
export NVDLA_LOADABLES
NVDLA_SW ?= $(firstword $(wildcard $(HOME)/nvdla-sw) $(wildcard $(abspath ../shared/nvdla_src/sw)))
export NVDLA_SW
# NVDLA's hardware checkouts: master (RTL, spec, AC headers) and nvdlav1 (nv_full's C model); the
# public copies beside the repository by default. Read-only is fine: builds go to the cache.
NVDLA_HW ?= $(firstword $(wildcard $(abspath ../shared/nvdla_src/hw)) $(HOME)/nvdla-hw)
NVDLA_HW_V1 ?= $(firstword $(wildcard $(abspath ../shared/nvdla_src/hw-v1)) $(HOME)/nvdla-hw-v1)
JOBS   ?= 2
HYPOTHESIS_PROFILE ?= ci
FUZZ_ROUNDS ?= 10

.PHONY: install embedded regress test test-slow lint typecheck fuzz bench clean flaky oracles oracle-rtl oracle-cmod oracle-compiler

$(BIN)/nvdla-hil: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# setuptools' generic notice on every editable install ("be careful with folders ... named as your
	@# package") is the only line it prints; filtered by its text, so any other warning still shows
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	@touch $@

install: $(BIN)/nvdla-hil

# the main job: NVDLA's traces of every public configuration, nv_full's own tests and the
# bundled vectors on the model target (the shared folders are used when they are there)
regress: install
	$(BIN)/nvdla-hil regress --target model \
	  $(if $(wildcard $(NVDLA_TRACE_SETS)),--traces $(NVDLA_TRACE_SETS)) \
	  $(if $(wildcard $(NVDLA_TXN_TESTS)),--txn $(NVDLA_TXN_TESTS))

# NVDLA's oracles, built once into the cache (~/.cache/nvdla-hil, or NVDLA_HIL_CACHE) from the
# checkouts above: nv_small's, nv_small_256_full's and nv_large's simulators of the RTL (NVDLA's tmake flow,
# in a cache copy of a read-only checkout; 1-2 min each), nv_full's C model (about 2 min on 2 cores)
# and NVDLA's compiler from NVDLA_SW (protobuf 2.6.1 + nvdla_compiler, about 2 min). The tests
# build what they need on first use; `make -j2 oracles` first (as CI does) keeps that out of the
# test run. Every step names what is missing (apt packages) when it cannot.
oracles: oracle-rtl oracle-cmod oracle-compiler

# (setup runs NVDLA's flow only when the check of what is there, --no-tmake, does not pass)
oracle-rtl: install
	$(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_small --no-tmake >/dev/null 2>&1 \
	  || $(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_small
	$(BIN)/nvdla-hil sim build --nvdla-hw $(NVDLA_HW) --config nv_small
	$(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_small_256_full --no-tmake >/dev/null 2>&1 \
	  || $(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_small_256_full --apply-fixes
	$(BIN)/nvdla-hil sim build --nvdla-hw $(NVDLA_HW) --config nv_small_256_full
	$(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_large --no-tmake >/dev/null 2>&1 \
	  || $(BIN)/nvdla-hil sim setup --nvdla-hw $(NVDLA_HW) --config nv_large
	$(BIN)/nvdla-hil sim build --nvdla-hw $(NVDLA_HW) --config nv_large

oracle-cmod: install
	NVDLA_HW=$(NVDLA_HW) $(BIN)/python -m nvdla_hil.harness.targets.cmod --nvdla-hw $(NVDLA_HW_V1)

oracle-compiler: install
	$(BIN)/nvdla-hil net build-compiler --nvdla-sw $(NVDLA_SW)

# the lint gate CI runs: ruff with the rule set and line length in pyproject.toml
lint: install
	$(BIN)/ruff check drivers harness sims nvdla_hil tests bench

# the type gate CI runs: mypy over the nvdla_hil package, settings in pyproject's [tool.mypy]
typecheck: install
	.ci/typecheck

# the real pytest-embedded (which owns --target too), for the tests of our plugin beside it only: a
# pip --target folder those tests put on their own PYTHONPATH, so it never loads into the rest of
# the run; offline, those tests skip, saying so
EMBEDDED := $(abspath $(VENV)/embedded)
embedded: install
	@[ -d $(EMBEDDED)/pytest_embedded ] || $(BIN)/pip install --quiet --no-deps --target $(EMBEDDED) \
	  pytest-embedded pexpect ptyprocess filelock \
	  || echo "note: pytest-embedded could not be installed; the tests of our plugin beside it will skip" >&2

# the default run (about 4 minutes on 2 cores, the oracles built): everything but the tests marked slow
test: install embedded
	NVDLA_HIL_EMBEDDED_PATH=$${NVDLA_HIL_EMBEDDED_PATH:-$(EMBEDDED)} \
	  $(BIN)/pytest -n $(JOBS) tests --hypothesis-profile=$(HYPOTHESIS_PROFILE) -m "not slow"

# the slow tests (lab servers, Dask clusters, campaigns, sweeps): CI's second step
test-slow: install embedded
	NVDLA_HIL_EMBEDDED_PATH=$${NVDLA_HIL_EMBEDDED_PATH:-$(EMBEDDED)} \
	  $(BIN)/pytest -n $(JOBS) tests --hypothesis-profile=$(HYPOTHESIS_PROFILE) -m slow

# property tests only, fresh random seeds each round (the "explore" profile, tests/conftest.py)
fuzz: install
	@for i in $$(seq $(FUZZ_ROUNDS)); do \
	  $(BIN)/pytest -q -n $(JOBS) -m hypothesis tests --hypothesis-profile=explore -p no:cacheprovider || exit 1; \
	done

bench: install
	$(BIN)/python bench/bench_refmodel.py
	$(BIN)/python bench/bench_layouts.py
	$(BIN)/python bench/bench_serial.py          # includes a 20,000-operation fault campaign (~11 min)
	@if [ -n "$$NVDLA_HW" ]; then $(BIN)/python bench/bench_sim.py --nvdla-hw "$$NVDLA_HW" --traces "$(NVDLA_TRACES)"; \
	else echo "bench_sim.py skipped: set NVDLA_HW to an nvdla/hw checkout with generated RTL"; fi

clean:
	rm -rf $(VENV) results .pytest_cache

# the suite RUNS times (LOAD CPU-bound processes beside each run): each test's flake rate
RUNS ?= 5
LOAD ?= 0
flaky: install
	$(BIN)/python bench/bench_flaky.py --runs $(RUNS) --load $(LOAD) \
	  --pytest-args "-n $(JOBS) tests --hypothesis-profile=$(HYPOTHESIS_PROFILE) -m 'not slow' $(FLAKY_ARGS)"
