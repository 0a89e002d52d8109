# The two commands of the README. Each bootstraps .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

HARNESSES := $(CURDIR)/.harnesses
export LIMBO_HARNESS_DIR ?= $(HARNESSES)

.PHONY: run test harnesses lint bench clean

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

# The pinned production harnesses (Codex CLI, Copilot CLI, Claude Code: npm; hermes-agent: its
# own venv) into .harnesses/; quick when they are already there.
harnesses: $(BIN)/limbo-test-ready
	$(BIN)/python -m limbo.harnesses.production

test: harnesses
	$(BIN)/ruff check .
	$(BIN)/pytest

bench: $(BIN)/limbo-run-ready
	$(BIN)/python benchmarks/bench_episodes.py

clean:
	rm -rf $(VENV) build *.egg-info runs .harnesses
