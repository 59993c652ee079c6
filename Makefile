# The project's commands. Each creates .venv and installs what it needs on first use.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH := .venv-bench
PYTHON ?= python3

# The web UI (ui/, React): its bundle ships in the package, in $(UI_DIST).
UI         := ui
UI_DIST    := src/tidemill/server/_ui_dist
UI_INDEX   := $(UI_DIST)/index.html
UI_MODULES := $(UI)/node_modules/.package-lock.json
UI_SOURCES := $(shell find $(UI)/src $(UI)/public $(UI)/index.html $(UI)/package.json \
	$(UI)/vite.config.ts $(UI)/tsconfig*.json -type f -not -path '$(UI)/src/api/schema.d.ts' \
	2>/dev/null)
# The UI's API types are generated from the server's OpenAPI document.
SERVER_PY  := $(shell find src/tidemill/server -name '*.py' 2>/dev/null)
OPENAPI    := import json; from tidemill.server import ServerConfig, create_app; \
	print(json.dumps(create_app(ServerConfig(worker=False)).openapi(), indent=1))

.PHONY: install demo test check docs docs-serve format bench clean ui ui-test

install: $(STAMP)

$(STAMP): pyproject.toml
	@echo "Installing Tidemill and its development tools (pip install -e '.[dev]') into $(VENV), once..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@# Debian's Chromium, which the browser tests (tests/e2e) drive with Playwright.
	@if command -v chromium >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		echo "Installing Debian's Chromium for the browser tests (apt-get install chromium)..."; \
		$$SUDO apt-get update -qq && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "No chromium and no apt-get here: install Chromium (the command 'chromium') for"; \
		echo "the browser tests in tests/e2e; without it they are skipped (and fail in CI)."; \
	fi
	touch $(STAMP)

ifeq ($(wildcard $(UI)/package.json),)
ui ui-test:
	@echo "No $(UI)/package.json: there is no web UI to build or test; skipping."
else
ui: $(UI_INDEX)  ## Build the web UI into the package (npm ci when package-lock.json changes)

ui-test: $(UI_INDEX)  ## The web UI's unit tests (vitest)
	cd $(UI) && npm test

$(UI_MODULES): $(UI)/package-lock.json
	@command -v npm >/dev/null || { echo "Building the web UI needs Node.js 20.19+ and npm" \
		"(https://nodejs.org); a released package ships it built."; exit 1; }
	cd $(UI) && npm ci --no-audit --no-fund
	touch $@

$(UI_INDEX): $(UI_MODULES) $(UI_SOURCES) $(SERVER_PY) | $(STAMP)
	$(PY) -c '$(OPENAPI)' > $(UI)/openapi.json.tmp
	mv $(UI)/openapi.json.tmp $(UI)/openapi.json
	cd $(UI) && npm run build
	touch $@
endif

demo: $(STAMP)  ## Run the main job on the embedded defaults (SQLite, the offline model)
	$(PY) examples/support_triage.py
	@echo
	$(PY) examples/flow_demo.py
	@echo
	$(PY) examples/approval_demo.py

test: $(STAMP) ui ui-test  ## The whole test suite: the UI built and its tests, then pytest in two processes
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
	$(BENCH)/bin/python benchmarks/server.py

clean:
	rm -rf $(VENV) $(BENCH) .pytest_cache .mypy_cache .ruff_cache .tidemill site
	rm -rf $(UI)/node_modules $(UI)/openapi.json $(UI)/src/api/schema.d.ts $(UI_DIST)
