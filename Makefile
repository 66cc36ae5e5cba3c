# Two commands on a fresh clone:  `make run`  (set up, then run)  and  `make test`  (set up, then test).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev,semantic
STAMP := $(VENV)/.installed-$(EXTRAS)

.PHONY: run test test-fast setup bench load clean

# Create or reuse .venv and install the project (uv when it can be had: much faster than pip).
# --compile-bytecode: the packages' .pyc are written once here, as pip does, not compiled again by every
# process the tests start (a worker or web process compiles ~2 s of CPU when PYTHONDONTWRITEBYTECODE is set).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check uv || true
	@if $(VENV)/bin/uv --version >/dev/null 2>&1; then \
		$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -e ".[$(EXTRAS)]"; \
	else \
		$(PY) -m pip install -q --disable-pip-version-check -e ".[$(EXTRAS)]"; \
	fi
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(PY) -m playground.run

test: $(STAMP)
	$(PY) scripts/run_tests.py

# The inner loop while developing: every test not marked slow or browser (no stacks, no Chromium), in workers.
test-fast: $(STAMP)
	$(PY) scripts/run_tests.py -m "not slow and not browser"

bench: $(STAMP)
	$(PY) -m playground.toolsearch bench

# Concurrent demo-agent conversations on a stack of its own; options: make load LOAD_ARGS="--conversations 1,10,50 --json"
LOAD_ARGS ?=
load: $(STAMP)
	$(PY) -m playground.loadtest $(LOAD_ARGS)

clean:
	rm -rf $(VENV) db.sqlite3 test_db.sqlite3 staticfiles .pytest_cache test-artifacts
