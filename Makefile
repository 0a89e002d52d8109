# The two commands of the README. Each bootstraps .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench clean

$(BIN)/limbo-run-ready: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[analysis]'
	touch $@

$(BIN)/limbo-test-ready: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]'
	touch $@ $(BIN)/limbo-run-ready

run: $(BIN)/limbo-run-ready
	$(BIN)/limbo run

test: $(BIN)/limbo-test-ready
	$(BIN)/ruff check .
	$(BIN)/pytest

bench: $(BIN)/limbo-run-ready
	$(BIN)/python benchmarks/bench_episodes.py

clean:
	rm -rf $(VENV) build *.egg-info runs
