# glassdesk: everything a fresh Debian machine needs, from this file.
#
#   make run        install what is missing, then start the default desktop + API (Ctrl-C stops all)
#   make test       install what is missing, then the whole test suite (junit + screenshots in artifacts/)
#   make test-unit  the pure unit tests only (no X), quick
#   make todomvc    fetch the TodoMVC app and Playwright's spec the ported QA suite tests (pinned, sha256-checked)
#   make playwright-runners  install @playwright/test and pytest-playwright (pinned) that exported specs are run under
#   make lint       ruff over the tree, then mypy (make test runs it first)
#   make bench      install what is missing, then the benchmark (prints a table, writes docs/benchmarks.md)
#   make docker-test  (root) build the Docker image and test it for real under a private dockerd (tests/docker)
#   make clean      remove what tests and builds leave behind (make distclean also removes .venv)
#
# Knobs: PYTHON (interpreter for the venv, default python3), RUN_ARGS (extra `glassdesk up` flags,
# e.g. RUN_ARGS="--port 8090"), PYTEST_ARGS (extra pytest flags, e.g. PYTEST_ARGS="-k click -x"),
# TEST_WORKERS (the parallel part's workers, default 3; 0 runs it in one process).
# `glassdesk up` also reads GLASSDESK_HOST, GLASSDESK_PORT, GLASSDESK_PUBLIC_HOST and GLASSDESK_TOKEN.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Written after a successful install; stale when pyproject.toml or constraints.txt changes.
STAMP := $(VENV)/.installed
ARTIFACTS := artifacts
RUN_ARGS ?=
PYTEST_ARGS ?=
# make test runs the suite in two parts. First every test not marked `serial`, on TEST_WORKERS
# pytest-xdist workers, a whole file per worker at a time (its module fixtures stay in one process;
# each worker has its own desktop session, ports, data dirs and desktop account), in collection
# order (tests/conftest.py: the real-X tiers first; xdist's own reorder, files with the most tests
# first, left a one-test file of 150 s running alone at the end). Then the `serial` tests alone, in
# one process, on an otherwise idle machine: those that time something or load the machine on
# purpose (the rule: docs/development.md). Three workers on two cores: a real-X test mostly waits.
TEST_WORKERS ?= 3
PYTEST := GLASSDESK_ARTIFACTS="$(CURDIR)/$(ARTIFACTS)" $(BIN)/pytest -o junit_family=xunit2 -rfE
PIP := $(BIN)/python -m pip --disable-pip-version-check

# The MCP Inspector CLI, a third-party MCP client the tests drive glassdesk with (pinned; Node.js).
INSPECTOR_VERSION := 2.12.0
INSPECTOR := $(VENV)/inspector/node_modules/.bin/mcp-inspector

.PHONY: help setup system-deps run test test-unit lint bench clean distclean constraints docker-test todomvc \
	playwright-runners

help:
	@sed -n 's/^#   //p' $(MAKEFILE_LIST)

## ------------------------------------------------------------------------------------- set-up

setup: system-deps $(STAMP)

# The one list of system packages, shared with docker/Dockerfile. Idempotent and quick when
# everything is present; it calls sudo for apt-get itself, and only when not run as root.
system-deps:
	@bash docker/install-system-deps.sh

$(BIN)/python: | system-deps
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt pip
	$(PIP) install -q -c constraints.txt -e '.[test]'
	# MiniWoB++'s task pages for glassdesk eval miniwob:... (vision.eval.miniwob); its Python side
	# (gymnasium, Selenium) is never imported, so its dependencies are not installed.
	$(PIP) install -q --no-deps miniwob==1.1.0
	# OSWorld's harness (docs/osworld.md): without its dependencies (torch, librosa...); those its
	# controllers, DesktopEnv, getters and the metrics used import are in the test extra.
	$(PIP) install -q --no-deps desktop-env==1.0.2
	@touch $@

# Without npm the inspector test falls back to npx, and skips (saying why) when there is no Node.js.
$(INSPECTOR): | $(BIN)/python
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --prefix $(VENV)/inspector --no-audit --no-fund --loglevel=error --save-exact \
	    @modelcontextprotocol/inspector@$(INSPECTOR_VERSION) \
	  || echo "could not install the MCP Inspector: its test will try npx"; \
	else echo "npm not found: the MCP Inspector test will use npx or skip"; fi

# The real app tests/qa/todomvc.yaml is tested on (tests/integration/test_qa_todomvc.py): npm packages
# at pinned versions, their SHA-256 checked, kept in .cache/ (ignored; make distclean removes it).
# Quick when they are there already.
todomvc: | $(BIN)/python
	$(BIN)/python -m tests.fakes.todomvc fetch

# The test runners a run exported as a Playwright spec is run under (tests/integration/test_export.py):
# @playwright/test from npm and pytest-playwright from PyPI, pinned, into .cache/ (ignored), never the
# venv (pytest-playwright's plugin would load in every pytest run). No browser download: the specs
# run /usr/bin/chromium. Quick when they are there already.
playwright-runners: | $(BIN)/python
	$(BIN)/python -m tests.fakes.playwright_runners fetch

# Re-pin constraints.txt from the current venv (after changing dependencies in pyproject.toml).
constraints:
	{ echo "# Pinned versions of every Python package glassdesk installs (make setup uses this with pip -c)."; \
	  echo "# Regenerate from a working venv: make constraints"; \
	  $(PIP) freeze --all --exclude-editable | grep -vE '^(-e |#)| @ |^(setuptools|wheel|distribute)==' | LC_ALL=C sort -f; \
	} > constraints.txt.new
	mv constraints.txt.new constraints.txt

## ------------------------------------------------------------------------------------- use

# `exec` leaves glassdesk as make's only child: Ctrl-C reaches it directly (the terminal signals
# the whole foreground group), it stops every session, and make returns once it has exited.
run: setup
	exec $(BIN)/glassdesk up $(RUN_ARGS)

# Both parts always run (a failure in the first does not hide the second's); exit 5, "no tests
# collected", is no failure: PYTEST_ARGS="-k ..." may leave one part empty. Then each part's wall
# time, and where the time went (tests/durations.py, also in artifacts/durations.txt).
test: setup $(INSPECTOR) todomvc playwright-runners lint
	@mkdir -p $(ARTIFACTS)
	@rm -f $(ARTIFACTS)/junit.xml $(ARTIFACTS)/junit-serial.xml
	@status=0; start=$$SECONDS; \
	$(PYTEST) tests -m "not serial" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  --junitxml=$(ARTIFACTS)/junit.xml \
	  $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	parallel=$$((SECONDS - start)); start=$$SECONDS; \
	$(PYTEST) tests -m serial -p no:xdist --junitxml=$(ARTIFACTS)/junit-serial.xml \
	  $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	serial=$$((SECONDS - start)); \
	{ echo "make test: parallel part $$parallel s on $(TEST_WORKERS) workers, serial part $$serial s"; \
	  $(BIN)/python -m tests.durations $(ARTIFACTS)/junit.xml $(ARTIFACTS)/junit-serial.xml; } \
	  | tee $(ARTIFACTS)/durations.txt; \
	exit $$status

# The linter, over the whole tree (a second or two), then the type checker over desktop/ and vision/
# (a minute from a fresh clone, seconds with its cache in .mypy_cache): their rules are in
# pyproject.toml, [tool.ruff] and [tool.mypy].
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

test-unit: setup
	@mkdir -p $(ARTIFACTS)
	$(BIN)/pytest tests/unit --junitxml=$(ARTIFACTS)/junit-unit.xml -o junit_family=xunit2 -q $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m tests.bench

# The image built and run for real: docker.io, debootstrap and Compose v2 installed, a private dockerd
# started and stopped, the base image made without a registry, the image built, tests/docker run.
# The scripts it runs (docker/test/) also serve by hand: see docs/docker.md, "The image's tests".
docker-test: setup
	bash docker/test/docker-test.sh

## ------------------------------------------------------------------------------------- tidy

clean:
	rm -rf $(ARTIFACTS) build dist .pytest_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .cache
