# Set-up is automatic: every target creates or updates .venv from pyproject.toml first. One .venv, two stamps:
# `make demo` installs the package with its `cli` extra (the `edinbox` command; no other extra, no dev tools);
# `make test` and the other targets add every extra and the dev group.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo

.PHONY: demo test lint typecheck generate check-generated docs bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[cli]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]' --group dev
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/edinbox demo

generate: $(STAMP)
	$(BIN)/python scripts/generate_sync.py

check-generated: $(STAMP)
	$(BIN)/python scripts/generate_sync.py --check

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy

# the documentation site (mkdocs.yml): --strict fails on a broken link, a missing page or an API reference that
# cannot be read; a few seconds. NO_MKDOCS_2_WARNING: no end-of-life banner of the theme in the log. Not
# --quiet: it hides the warnings from the count --strict fails on
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the suite's modules spread over workers (pytest-xdist; a module stays on one worker, its fixtures shared; the
# heaviest modules go first, tests/conftest.py's HEAVY, which --no-loadscope-reorder keeps: by default xdist hands out
# the modules with the most tests first, and the long fault modules, a few tests each, were left to run alone at the
# end): most tests wait on servers, brokers and subprocesses, so more workers than cores finish sooner (the whole
# suite: 1,637 s on two at a background load of about 10, 994 s on three at about 5; the same tree of 3,039 tests 695 s
# on three, 562 s on four, the CPU still 11-40 % idle on four) and the timing tests held. WORKERS=0 runs in one process.
WORKERS ?= 4

# every check: the static ones (lint, typecheck, check-generated, docs: about 30 s, mostly CPU) run beside the tests,
# which mostly wait, and their output is shown after the tests'; the target fails when either fails. The package is
# byte-compiled first: the tests start hundreds of `edinbox` processes, and where PYTHONDONTWRITEBYTECODE is set (as on
# the development machines) each of them compiled every module it imported again (tests/cli/test_privileges.py and
# test_redrive.py: 13 s of CPU instead of 15.5, 44.6 s instead of 48.4); Python checks each file's source time, so a
# stale one is never used
test: $(STAMP)
	@$(BIN)/python -m compileall -q src
	@checks=$$(mktemp); \
	$(MAKE) --no-print-directory lint typecheck check-generated docs >$$checks 2>&1 & static=$$!; \
	$(BIN)/pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder; tests=$$?; \
	wait $$static; failed=$$?; cat $$checks; rm -f $$checks; \
	if [ $$failed -ne 0 ]; then echo "make test: a static check failed (see above)" >&2; fi; \
	[ $$failed -eq 0 ] && [ $$tests -eq 0 ]

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
