# Set-up is automatic: every target creates or updates .venv from pyproject.toml first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck generate check-generated bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]' --group dev
	touch $(STAMP)

demo: $(STAMP)
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

test: $(STAMP) lint typecheck check-generated
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
