# Two entry points: `make demo` and `make test`. Both create .venv and install
# skillbase into it first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch goes in before anything that depends on it: with no torch present, an
# unpinned requirement would pull a multi-GB CUDA build. A torch already in the
# venv (for example a CUDA build on a GPU box) is kept as it is.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# Two pytest workers (pytest-xdist), a test file each at a time: the suite is mostly one busy core
# otherwise (649 s on 2 cores, 516 s with two workers, 2026-11-28). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
# `make test` is the everyday tier: every test but those marked slow (integration runs of 20-100 s each:
# Ray clusters, full C++ builds, killed-and-resumed suite runs, the installed wheel, Claude Code, every
# shipped example verified), within 8 minutes on 2 cores. `make test-slow` runs those; CI runs both.
TEST_TIER ?= not slow
DEMO_HOME ?= $(CURDIR)/.demo-home

.PHONY: install lint test test-slow test-all demo gpu-suite clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

# ruff (lint and format) on the product packages: a gate, not advice.
LINT_DIRS := skillbase memory retrievers mcp_server

lint: install
	$(PY) -m ruff check $(LINT_DIRS)
	$(PY) -m ruff format --check $(LINT_DIRS)

test: install lint
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "$(TEST_TIER)" $(PYTEST_ARGS)

test-slow:
	$(MAKE) test TEST_TIER=slow

test-all:
	$(MAKE) test TEST_TIER="slow or not slow"

demo: install
	SKILLBASE_HOME=$(DEMO_HOME) $(VENV)/bin/skillbase demo

gpu-suite:
	bash benchmarks/gpu_suite.sh

clean:
	rm -rf $(VENV) $(DEMO_HOME) *.egg-info
