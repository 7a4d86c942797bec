# Two entry points for a fresh machine (see README): `make run` and `make test`.
# Each creates .venv on first use (Python >= 3.10) and installs xlabench with the JAX CPU extras.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUITE ?= suites/gpt2.yaml

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

.PHONY: setup run test
setup: $(BIN)/.installed

## the main job: a CPU run of a real suite (cpu profile picked automatically), then its plots
run: setup
	$(BIN)/xlabench run $(SUITE)
	$(BIN)/xlabench plot

## every test
test: setup
	$(BIN)/python -m pytest -q
