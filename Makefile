# The project's commands. Each creates .venv and installs what it needs on first use.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH := .venv-bench
PYTHON ?= python3

.PHONY: install demo test check docs docs-serve format bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@echo "Installing Tidemill and its development tools (pip install -e '.[dev]') into $(VENV), once..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)  ## Run the main job on the embedded defaults (SQLite, the offline model)
	$(PY) examples/support_triage.py
	@echo
	$(PY) examples/flow_demo.py
	@echo
	$(PY) examples/approval_demo.py

test: $(STAMP)  ## The whole test suite, in two processes
	$(PY) -m pytest -n 2

check: $(STAMP)  ## Lint, format check and strict type check
	$(VENV)/bin/ruff check src tests benchmarks examples docs_hooks.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples docs_hooks.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

docs: $(STAMP)  ## Build the docs site into site/, failing on any warning
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)  ## Serve the docs site at http://127.0.0.1:8000 while editing
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

format: $(STAMP)
	$(VENV)/bin/ruff format src tests benchmarks examples docs_hooks.py
	$(VENV)/bin/ruff check --fix src tests benchmarks examples docs_hooks.py

$(BENCH)/.installed: benchmarks/requirements.txt pyproject.toml
	@echo "Installing Tidemill and the peers it is measured against into $(BENCH), once..."
	$(PYTHON) -m venv $(BENCH)
	$(BENCH)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH)/bin/python -m pip install --quiet -e '.[postgres,proxy,server]' -r benchmarks/requirements.txt
	touch $(BENCH)/.installed

bench: $(BENCH)/.installed  ## Benchmarks against the peers, in their own environment
	$(BENCH)/bin/python benchmarks/agent_loop.py
	$(BENCH)/bin/python benchmarks/proxy.py
	$(BENCH)/bin/python benchmarks/engine.py
	$(BENCH)/bin/python benchmarks/agent_steps.py
	$(BENCH)/bin/python benchmarks/guardrails.py

clean:
	rm -rf $(VENV) $(BENCH) .pytest_cache .mypy_cache .ruff_cache .tidemill site
