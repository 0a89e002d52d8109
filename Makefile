# The commands of the README. Each bootstraps .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

HARNESSES := $(CURDIR)/.harnesses
export LIMBO_HARNESS_DIR ?= $(HARNESSES)

.PHONY: run check test harnesses lint bench clean chromium

# `limbo run` needs the core dependencies only (simpy, pydantic, rich): no extra. The tables,
# figures and report need the `analysis` extra, which `make test` installs.
$(BIN)/limbo-run-ready: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/limbo-test-ready: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]'
	touch $@ $(BIN)/limbo-run-ready

run: $(BIN)/limbo-run-ready
	$(BIN)/limbo run

# Debian's chromium for the HTML report's browser tests (Playwright drives it; its own browser
# download would fail offline). Quick when installed; where it cannot be installed (no apt-get, not
# root, no registry) the browser tests skip with that reason, except under CI, where they fail.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "make: installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "make: could not install chromium; the browser tests will be skipped"; \
	  else echo "make: chromium is not installed and apt-get (as root) is not available; the browser tests will be skipped"; fi; }

# The pinned production harnesses (Codex CLI, Copilot CLI, Claude Code: npm; hermes-agent: its
# own venv) into .harnesses/; quick when they are already there.
harnesses: $(BIN)/limbo-test-ready
	$(BIN)/python -m limbo.harnesses.production

# The fast loop, before a commit: lint, the type check (mypy's incremental cache in .mypy_cache makes
# a warm run a few seconds) and the tests marked none of slow, harness, ray, browser
# (tests/support/marks.py). It prints the fast set's slowest tests: a test that grew slow shows
# there, and goes into the table. `make test` is the whole suite, what CI runs. Python's bytecode
# cache is kept even where the environment turns it off (PYTHONDONTWRITEBYTECODE): without it every
# run compiles, and pytest rewrites, each test module again (a third of a warm run).
FAST := not slow and not harness and not ray and not browser

check: $(BIN)/limbo-test-ready
	$(BIN)/ruff check .
	$(BIN)/python tools/typecheck.py
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -m "$(FAST)" --durations=5

# The whole suite: all but the Ray tests in two pytest-xdist workers, one fixed half each
# (tests/support/marks.py, half_of: the tests that start other processes beside those that run
# in-process), then the Ray tests alone — a Ray node starting beside the other half's work timed
# out registering with its head.
test: harnesses chromium
	$(BIN)/ruff check .
	$(BIN)/python tools/typecheck.py
	$(BIN)/pytest -n 2 --dist loadgroup -m "not ray"
	$(BIN)/pytest -m ray

bench: $(BIN)/limbo-run-ready
	$(BIN)/python benchmarks/bench_episodes.py

clean:
	rm -rf $(VENV) build *.egg-info runs test-artefacts .harnesses
