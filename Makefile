# Two entry points for a fresh machine (see README): `make run` and `make test`.
# Each creates .venv on first use (Python >= 3.10) and installs xlabench with the JAX CPU extras.
# Installs go through uv (pip's resolver and one-at-a-time downloads took 170 s for the three environments
# of a fresh clone, uv 64 s with the same versions); pip only installs uv itself. --compile-bytecode: uv, unlike
# pip, writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set (as on this project's CI machines)
# none is ever written, so every process compiled jax, numpy, pandas and torch from source again: importing jax
# took 5.5 s of CPU instead of 2.7, torch_xla 10.4 s instead of 5.3, and a fresh clone's tests 914 s instead of 704.
# (The torch_xla environment writes bytecode for what it imports instead: see there.)
# Two jobs: the environments build side by side (`make torch-xla-env test`: the torch_xla check, one thread
# importing torch_xla, beside the JAX installs' bytecode compile on both cores took a fresh clone's setup from
# 53.8 s to 40.4 s); every other target is a chain of prerequisites, run in order as before. Set by the
# top make only: a sub-make (pytest-run) shares its jobs, where setting them again warned.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += --jobs=2
endif
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUITE ?= suites/gpt2.yaml
UV := $(BIN)/uv
UV_VERSION ?= 0.13.9

$(UV):
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q 'uv==$(UV_VERSION)'

$(BIN)/.installed: pyproject.toml | $(UV)
	$(UV) pip install -q --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $@

# The torch_xla environment, apart from the JAX one (torch 2.9.0 from PyPI is a 4.2 GB CUDA build;
# ~7.6 GB installed). xlabench finds it at .venv-torch-xla (or --python-torch-xla / XLABENCH_TORCH_XLA_PYTHON).
# Idempotent: a complete environment is left alone. On a TPU VM add libtpu: TXLA_EXTRAS=pallas,tpu.
# torch_xla 2.9.0's wheel bundles an older torchax that imports flax at import time: the torchax release
# that call_jax needs goes in after torch_xla, on its own, and overwrites it.
TXLA_VENV ?= .venv-torch-xla
TXLA_BIN := $(TXLA_VENV)/bin
TXLA_EXTRAS ?= pallas
# Bytecode: of its ~10,600 Python files its processes import ~2,650, so the installs compile none (that took
# 31 s of a fresh clone's 46 s here) and the check, which imports torch_xla, writes theirs (20 s, whatever
# PYTHONDONTWRITEBYTECODE says); the tests write those imported later once (pytest-run).
$(TXLA_BIN)/.installed: pyproject.toml | $(UV)
	test -x $(TXLA_BIN)/python || $(UV) venv -q --python $(PY) $(TXLA_VENV)
	$(UV) pip install -q --python $(TXLA_BIN)/python 'torch==2.9.0' 'torch_xla[$(TXLA_EXTRAS)]==2.9.0' -e '.[torch-xla]'
	$(UV) pip install -q --python $(TXLA_BIN)/python --no-deps --reinstall 'torchax==0.0.13'
	env -u PYTHONDONTWRITEBYTECODE $(TXLA_BIN)/python -c 'import torch_xla, torchax, jax; from torch_xla.core.xla_builder import call_jax'
	touch $@

# TorchTPU's environment (torch_tpu), apart from the JAX and torch_xla ones: torch >= 2.11 conflicts with
# torch_xla's 2.9. On a TPU VM: torch's CPU build (TorchTPU is its TPU device; PyPI's default torch is a CUDA
# build), torch-tpu with the libtpu it needs (>= 0.0.50), and plain JAX, which only traces the Pallas kernels
# there (the worker keeps JAX on the CPU). xlabench finds it at .venv-torch-tpu (or XLABENCH_TORCH_TPU_PYTHON).
# Idempotent. Its check imports torch_tpu and counts the TPU devices: it fails where there is no TPU. Resolved
# here against PyPI alone (uv --dry-run): torch 2.15.0, torch-tpu 0.2.0, libtpu 0.0.52, jax 0.10.2.
TTPU_VENV ?= .venv-torch-tpu
TTPU_BIN := $(TTPU_VENV)/bin
TORCH_TPU_VERSION ?= 0.2.0
$(TTPU_BIN)/.installed: pyproject.toml | $(UV)
	test -x $(TTPU_BIN)/python || $(UV) venv -q --python $(PY) $(TTPU_VENV)
	$(UV) pip install -q --compile-bytecode --python $(TTPU_BIN)/python --index-strategy unsafe-best-match \
	  --extra-index-url https://download.pytorch.org/whl/cpu 'torch>=2.11,<2.16' 'torch-tpu==$(TORCH_TPU_VERSION)' -e '.[torch-tpu]'
	$(TTPU_BIN)/python -c 'import torch, torch_tpu; assert torch.accelerator.device_count() > 0, "no TPU found"'
	touch $@

# Apache Otava (its E-divisive change-point detector), apart from the JAX environment: it pins numpy 2.2.
# Only benchmarks/changes_vs_otava.py uses it (xlabench's detector side by side with Otava's on the same
# series). Idempotent: a complete environment is left alone.
OTAVA_VENV ?= .venv-otava
OTAVA_BIN := $(OTAVA_VENV)/bin
OTAVA_VERSION ?= 0.8.0
$(OTAVA_BIN)/.installed:
	test -x $(OTAVA_BIN)/python || $(PY) -m venv $(OTAVA_VENV)
	$(OTAVA_BIN)/python -m pip install -q --upgrade pip
	$(OTAVA_BIN)/python -m pip install -q 'apache-otava==$(OTAVA_VERSION)'
	$(OTAVA_BIN)/python -c 'from otava.analysis import compute_change_points'
	touch $@

# libtpu in the JAX environment (~680 MB) for `xlabench compile` (compile-only TPU devices, no TPU needed).
# CPU workers stay on the CPU (xlabench sets JAX_PLATFORMS=cpu where no accelerator is present).
$(BIN)/.tpu-compile: $(BIN)/.installed
	$(UV) pip install -q --compile-bytecode --python $(BIN)/python -e '.[tpu-compile]'
	touch $@

.PHONY: setup bytecode run lint test test-fast pytest-run torch-xla-env torch-tpu-env otava-env tpu-compile compile readme-charts
setup: $(BIN)/.installed

## xlabench's own modules as bytecode (compileall skips what is up to date). The installs compile the packages
## (--compile-bytecode), but the source tree is an editable install: where PYTHONDONTWRITEBYTECODE is set nothing
## wrote its .pyc, and every CLI and worker process compiled xlabench again (a CLI start took 0.6 s of CPU, 0.4 s
## with them; the tests start ~270 such processes)
bytecode: setup
	$(BIN)/python -m compileall -q xlabench

## libtpu for `xlabench compile` (run once; `make test` does it)
tpu-compile: $(BIN)/.tpu-compile

## compile a suite for a TPU slice without a TPU: make compile SUITE=suites/gpt2.yaml TARGET=v4-8
TARGET ?= v4-8
compile: tpu-compile
	$(BIN)/xlabench compile $(SUITE) --target $(TARGET)
	$(BIN)/xlabench plot

## the torch_xla environment (run once; `make test` and `xlabench run` then drive it)
torch-xla-env: $(TXLA_BIN)/.installed

## TorchTPU's environment, on a TPU VM (run once; `xlabench run` then drives it)
torch-tpu-env: $(TTPU_BIN)/.installed

## Apache Otava in its own environment (run once; benchmarks/changes_vs_otava.py uses it)
otava-env: $(OTAVA_BIN)/.installed

## the main job: a CPU run of a real suite (cpu profile picked automatically), then its plots;
## it writes only to results/ and plots/, which git ignores (the tree stays clean)
# the suite's name (its results folder), read from its `name:` line: `plot` draws that suite's newest run only
SUITE_NAME = $(shell sed -n 's/^name:[[:space:]]*//p' $(SUITE) | head -n 1 | tr -d "\"'")
run: setup bytecode
	$(BIN)/xlabench run $(SUITE)
	$(BIN)/xlabench plot results/$(SUITE_NAME)

## the README's own charts and MFU table (docs/img/, tracked): run on purpose, never by `make run`
readme-charts: setup
	$(BIN)/xlabench run suites/gpt2.yaml
	$(BIN)/python benchmarks/readme_charts.py

## lint (ruff, configured in pyproject.toml)
lint: setup
	$(BIN)/ruff check xlabench tests benchmarks

## every test, after the lint and the audit of the committed run files (docs/audit.md), on TEST_JOBS pytest workers (pytest-xdist; default one per core), a test
## module per worker (its module-scoped fixtures are built once); TEST_JOBS=0 runs them in this process;
## the 15 slowest are listed at the end (CI's budget is 15 minutes: what to trim first)
TEST_JOBS ?= auto
# the tests drive the torch_xla environment: where it is a goal beside them they wait for it
TEST_WAITS_FOR := $(filter torch-xla-env,$(MAKECMDGOALS))
test: lint tpu-compile bytecode | $(TEST_WAITS_FOR)
	$(BIN)/xlabench audit docs/data
	@$(MAKE) --no-print-directory pytest-run PYTEST_ARGS="--durations=15"

## the quick loop while developing: everything but the `slow` tests, those that start a process or run a
## simulation (CI runs them all)
test-fast: lint tpu-compile bytecode | $(TEST_WAITS_FOR)
	@$(MAKE) --no-print-directory pytest-run PYTEST_ARGS='-m "not slow"'

# pytest as `test` and `test-fast` run it; its exit 5 (no test ran: a typo in a path or a marker) fails
# with a line saying so, never passes quietly. Bytecode writes on: a module that no install compiled (the
# torch_xla environment's lazily imported ones, the tests' own) is compiled once, not in every process.
PYTEST_ARGS ?=
pytest-run:
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests (exit 5): that is a failure, not a pass" >&2; fi; exit $$rc
