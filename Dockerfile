# Two images. The last stage, the default, is the API on containers (ECS, Kubernetes, ...)
# against a real DynamoDB: `docker build -t graph-api .`; credentials come from the task role
# or the environment, see deploy/README.md.
# `--target demo` is `make run` in a container, to try the API with Docker alone:
#   docker build --target demo -t graph-api-demo . && docker run --rm -p 8000:8000 graph-api-demo
# then open http://localhost:8000/graphql. Its data lives in the container and goes with it.

# GraphiQL's bundles for the demo, from the npm packages web/graphiql pins (as `make` does).
FROM node:20-slim AS graphiql
WORKDIR /web
COPY web/graphiql/package.json web/graphiql/package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

# The embedded demo: the `embedded` extra (moto) from uv.lock, hash-checked, and `graph-api
# serve` on all interfaces, as `make run` serves on this machine's. Never for real data.
FROM python:3.11-slim AS demo
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md deploy/requirements-demo.txt ./
COPY graph_api ./graph_api
COPY --from=graphiql \
    /web/node_modules/graphiql/graphiql.min.css \
    /web/node_modules/graphiql/graphiql.min.js \
    /web/node_modules/react/umd/react.production.min.js \
    /web/node_modules/react-dom/umd/react-dom.production.min.js \
    ./graph_api/http/static/graphiql/
RUN pip install --no-cache-dir --require-hashes -r requirements-demo.txt \
    && pip install --no-cache-dir --no-deps . \
    && rm -rf /src \
    && useradd --system --uid 10001 --create-home --home-dir /app --shell /usr/sbin/nologin app
# serve keeps its embedded server's address and a cursor secret under .data/ here.
WORKDIR /app
USER 10001
ENV GRAPH_API_BACKEND=embedded \
    GRAPH_API_HOST=0.0.0.0 \
    GRAPH_API_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=120s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]
CMD ["graph-api", "serve"]

# The production image.
FROM python:3.11-slim AS production

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Installed as a package (byte-compiled by pip), then the source goes: the user cannot write
# .pyc files, and the app must not import from a copy that differs from the installed one.
# The dependencies are uv.lock's exact versions, hash-checked (requirements.txt is exported
# from the lock by `make lock`); then the project alone.
WORKDIR /src
COPY pyproject.toml requirements.txt README.md ./
COPY graph_api ./graph_api
RUN pip install --no-cache-dir --require-hashes -r requirements.txt \
    && pip install --no-cache-dir --no-deps . \
    && rm -rf /src \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin app
# uvicorn's supervisor logs as the workers do (one format a run: JSON unless
# GRAPH_API_LOG_FORMAT=text), through graph_api.logs, not in uvicorn's own text.
COPY deploy/uvicorn-logging.json /etc/graph-api/uvicorn-logging.json

WORKDIR /app

USER 10001

# Never the embedded demo backend: a container that served an in-memory table would look
# healthy and lose every write (graph_api.http.hosting refuses it). Set GRAPH_API_TABLE,
# GRAPH_API_CURSOR_SECRET and AWS_REGION when running.
# uvicorn reads UVICORN_* for its options and WEB_CONCURRENCY for --workers: one worker per
# vCPU the task has (each worker is one event loop); `graph-api serve` reads the same
# variable. Set explicitly: in a container the CPUs Python sees are the host's.
# /metrics sums the workers' values kept there (prometheus_client's multiprocess mode); it
# is served on a port of its own (GRAPH_API_METRICS_PORT), never on the API's.
# UVICORN_WS_MAX_SIZE: a websocket message's cap, GRAPH_API_MAX_BODY_BYTES' (raise both).
# UVICORN_HTTP=h11 with its head bound: headers over 16 KB in all are refused unread
# (httptools has no bound). FORWARDED_ALLOW_IPS: the proxies whose X-Forwarded-For counts,
# none unless set (e.g. the load balancer's subnets); `graph-api serve` passes the same.
# UVICORN_TIMEOUT_WORKER_HEALTHCHECK: uvicorn's 5 s killed workers still importing on a busy
# host (GRAPH_API_WORKER_HEALTHCHECK_SECONDS is serve's).
ENV GRAPH_API_BACKEND=remote \
    PROMETHEUS_MULTIPROC_DIR=/tmp/graph-api-metrics \
    GRAPH_API_METRICS_PORT=9464 \
    GRAPH_API_METRICS_HOST=0.0.0.0 \
    UVICORN_LOG_CONFIG=/etc/graph-api/uvicorn-logging.json \
    UVICORN_HOST=0.0.0.0 \
    UVICORN_PORT=8000 \
    WEB_CONCURRENCY=2 \
    UVICORN_TIMEOUT_GRACEFUL_SHUTDOWN=20 \
    UVICORN_TIMEOUT_WORKER_HEALTHCHECK=60 \
    UVICORN_WS_MAX_SIZE=100000 \
    UVICORN_HTTP=h11 \
    UVICORN_H11_MAX_INCOMPLETE_EVENT_SIZE=16384 \
    FORWARDED_ALLOW_IPS=""

EXPOSE 8000 9464
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ['UVICORN_PORT']}/healthz\", timeout=2)"]

CMD ["uvicorn", "--factory", "graph_api.http.hosting:create_app_from_env", "--no-server-header"]
