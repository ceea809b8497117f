"""Settings, read once from the environment (`GRAPH_API_*`, plus botocore's own `AWS_*`)."""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

Backend = Literal["embedded", "remote"]

# Any of these means the user pointed us at a real DynamoDB (or an emulator of it).
_REMOTE_HINTS = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_LAMBDA_FUNCTION_NAME",
)


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    table: str = "graph"
    backend: Backend = "embedded"
    region: str = "us-east-1"
    # An endpoint this process started itself (embedded moto; DynamoDB Local in tests),
    # reached with throwaway credentials. None lets botocore resolve the endpoint
    # (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, or AWS) and the credentials itself.
    endpoint_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    cursor_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    cursor_secret_configured: bool = False
    # Where `make run` keeps its development secret (`with_dev_cursor_secret`), if it does.
    cursor_secret_file: str | None = None
    accounting: bool = True
    max_concurrency: int = 16
    deadline_seconds: float = 10.0
    # Limits on what one request may ask (each violation is a coded GraphQL error).
    max_depth: int = 10
    max_aliases: int = 30
    max_tokens: int = 5000
    max_body_bytes: int = 100_000
    max_cost: int = 50_000
    introspection: bool = True
    graphiql: bool = True
    # Auth for writes: a JWKS URL (OIDC) or an HS256 secret; issuer and audience required.
    jwks_url: str = ""
    jwt_secret: str = field(default="", repr=False)
    jwt_issuer: str = ""
    jwt_audience: str = ""
    auth_reads: bool = False
    # That anyone may write on purpose, without a token: `serve` against AWS's own DynamoDB
    # with no sign-in configured refuses to start without it (`hosting.open_writes_problem`), and
    # the embedded demo, which otherwise wants its dev tokens, lets a caller without one
    # write (`tokens.Authenticator.anonymous`).
    open_writes: bool = False
    # Which claims of a verified token say who the caller is (graph_api/graph/auth/tokens.py):
    # its roles, the student or teacher node it is, the students a guardian looks after.
    roles_claim: str = "roles"
    student_claim: str = "graph:student"
    teacher_claim: str = "graph:teacher"
    guardian_claim: str = "graph:students"
    # Students' emails and street addresses to anyone, not only to authenticated readers.
    # Off unless asked, on the embedded demo too: its dev tokens show the policy at work.
    public_personal_data: bool = False
    log_format: str = "text"
    naive: bool = False
    demo_students: int = 500
    demo_seed: int = 7
    log_level: str = "INFO"
    # Subscriptions: at most this many in the process, and events waiting per subscriber
    # before a subscriber that does not read is ended (UNAVAILABLE).
    max_subscriptions: int = 10_000
    max_subscriptions_per_connection: int = 100
    # Per caller (a token's subject; without one, the client's address): one client cannot
    # hold every slot of the process.
    max_subscriptions_per_principal: int = 500
    subscription_queue: int = 1000
    # A websocket with no operation for this long is closed (1000, with a reason): a client
    # that stopped subscribing does not hold a connection and its memory forever.
    ws_idle_seconds: float = 300.0
    # How events reach every instance's subscriptions (graph_api/events/broker.py):
    # "memory" (one instance) or a redis:// / rediss:// URL, which may hold a password.
    events_broker: str = field(default="memory", repr=False)
    # Processes serving this app side by side (`serve --workers`, uvicorn's WEB_CONCURRENCY):
    # more than one share events only through a real broker.
    workers: int = 1
    # The change stream reader (`graph_api/events/reader.py`): how long an idle shard waits
    # before asking again (write-to-event latency), and how long its lease lasts unrenewed
    # (how soon another instance takes over from one that died; renewed every third).
    stream_poll_seconds: float = 0.25
    stream_lease_seconds: float = 10.0
    # Telemetry (graph_api/telemetry/): `GET /metrics`, and traces when the OpenTelemetry
    # SDK's variables ask for an exporter (`tracing_wanted`). With `metrics_port`, /metrics
    # is served there (on `metrics_host`), not on the API's port, as Prometheus exporters do.
    metrics: bool = True
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    tracing: bool = False
    # `serve --workers N`: how long uvicorn's supervisor waits for a worker's answer to its
    # health check (a worker still importing on a busy host answers late, not never).
    worker_healthcheck_seconds: float = 60.0
    # Origins a browser page may call the API from (CORS, `graph_api/http/cors.py`): a
    # comma list of `scheme://host[:port]`, or `*` for any; and a pattern of origins, which
    # the embedded backend sets when the list is not: localhost and 127.0.0.1 on any port.
    # Strings, not tuples: settings travel to `serve`'s workers as JSON.
    cors_origins: str = ""
    cors_origin_regex: str = ""
    # Persisted documents (graph_api/http/persisted.py): "any" runs any document (and APQ
    # registers them); "trusted" runs only the manifest's, a file `graph-api persist` writes.
    # A query by id over GET may be cached by a CDN for `documents_max_age` seconds.
    documents: str = "any"
    documents_manifest: str = ""
    documents_max_age: int = 60
    # Rate limits by cost, per caller (graph_api/graph/engine/budgets.py): "" keeps the policy
    # table's budgets (`policy.BUDGETS`), "off" turns them off, else rows that override it:
    # "anonymous=50000/1000,admin=1000000/20000" (maximum points / points restored a second).
    rate_limits: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        backend = env.get("GRAPH_API_BACKEND", "auto").strip().lower()
        if backend == "auto":
            backend = "remote" if any(env.get(name) for name in _REMOTE_HINTS) else "embedded"
        if backend not in ("embedded", "remote"):
            raise SettingsError("GRAPH_API_BACKEND must be auto, embedded or remote")
        for name in ENDPOINT_VARIABLES:
            check_endpoint(env, name)
        secret = env.get("GRAPH_API_CURSOR_SECRET", "")
        origins = cors_origins(env.get("GRAPH_API_CORS_ORIGINS", ""))
        local = not origins and backend == "embedded"
        return cls(
            table=env.get("GRAPH_API_TABLE", "graph"),
            backend=backend,  # type: ignore[arg-type]
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            host=env.get("GRAPH_API_HOST", "127.0.0.1"),
            port=_int(env, "GRAPH_API_PORT", 8000, minimum=1, maximum=65535),
            cursor_secret=secret.encode() if secret else secrets.token_bytes(32),
            cursor_secret_configured=bool(secret),
            accounting=_bool(env, "GRAPH_API_ACCOUNTING", True),
            max_concurrency=_int(env, "GRAPH_API_MAX_CONCURRENCY", 16, minimum=1),
            deadline_seconds=_seconds(env, "GRAPH_API_DEADLINE_SECONDS", 10.0),
            max_depth=_int(env, "GRAPH_API_MAX_DEPTH", 10, minimum=1),
            max_aliases=_int(env, "GRAPH_API_MAX_ALIASES", 30),
            max_tokens=_int(env, "GRAPH_API_MAX_TOKENS", 5000, minimum=1),
            max_body_bytes=_int(env, "GRAPH_API_MAX_BODY_BYTES", 100_000, minimum=1),
            max_cost=_int(env, "GRAPH_API_MAX_COST", 50_000, minimum=1),
            introspection=_bool(env, "GRAPH_API_INTROSPECTION", True),
            graphiql=_bool(env, "GRAPH_API_GRAPHIQL", True),
            **_auth(env),
            public_personal_data=_bool(env, "GRAPH_API_PUBLIC_PERSONAL_DATA", False),
            log_format=_choice(
                env,
                "GRAPH_API_LOG_FORMAT",
                ("text", "json"),
                "text" if backend == "embedded" else "json",
            ),
            naive=_bool(env, "GRAPH_API_NAIVE", False),
            demo_students=_int(env, "GRAPH_API_DEMO_STUDENTS", 500),
            demo_seed=_int(env, "GRAPH_API_DEMO_SEED", 7),
            log_level=_log_level(env.get("GRAPH_API_LOG_LEVEL", "INFO")),
            max_subscriptions=_int(env, "GRAPH_API_MAX_SUBSCRIPTIONS", 10_000, minimum=1),
            max_subscriptions_per_connection=_int(
                env, "GRAPH_API_MAX_SUBSCRIPTIONS_PER_CONNECTION", 100, minimum=1
            ),
            max_subscriptions_per_principal=_int(
                env, "GRAPH_API_MAX_SUBSCRIPTIONS_PER_PRINCIPAL", 500, minimum=1
            ),
            subscription_queue=_int(env, "GRAPH_API_SUBSCRIPTION_QUEUE", 1000, minimum=1),
            ws_idle_seconds=_seconds(env, "GRAPH_API_WS_IDLE_SECONDS", 300.0),
            events_broker=events_broker(env.get("GRAPH_API_EVENTS_BROKER", "")),
            workers=_int(env, "WEB_CONCURRENCY", 1, minimum=1),
            stream_poll_seconds=_seconds(env, "GRAPH_API_STREAM_POLL_SECONDS", 0.25),
            stream_lease_seconds=_seconds(env, "GRAPH_API_STREAM_LEASE_SECONDS", 10.0),
            **_metrics(env, backend),
            tracing=tracing_wanted(env),
            worker_healthcheck_seconds=_seconds(env, "GRAPH_API_WORKER_HEALTHCHECK_SECONDS", 60.0),
            cors_origins=origins,
            cors_origin_regex=LOCAL_ORIGINS if local else "",
            **_documents(env),
            rate_limits=rate_limits(env.get("GRAPH_API_RATE_LIMITS", "")),
        )


def _metrics(env: Mapping[str, str], backend: str) -> dict[str, Any]:
    """/metrics: on a port of its own when GRAPH_API_METRICS_PORT names one; else on the
    API's port for the embedded demo only. A remote backend's API port (often public) does
    not serve it unless GRAPH_API_METRICS=true asks; a function's process cannot be scraped."""
    port = _int(env, "GRAPH_API_METRICS_PORT", 0, minimum=0, maximum=65535)
    lambda_ = bool(env.get("AWS_LAMBDA_FUNCTION_NAME"))
    default = bool(port) or (backend == "embedded" and not lambda_)
    host = env.get("GRAPH_API_METRICS_HOST", "").strip() or env.get("GRAPH_API_HOST", "127.0.0.1")
    return {
        "metrics": _bool(env, "GRAPH_API_METRICS", default),
        "metrics_port": port,
        "metrics_host": host,
    }


def tracing_wanted(env: Mapping[str, str]) -> bool:
    """Traces are exported when the OpenTelemetry SDK's own variables name an exporter or an
    OTLP endpoint, unless OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none says otherwise."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


DEV_CURSOR_SECRET = Path(".data") / "cursor-secret"  # relative to the working directory
_SECRET_BYTES = 32


def with_dev_cursor_secret(settings: Settings, path: Path = DEV_CURSOR_SECRET) -> Settings:
    """`graph-api serve` on the embedded backend (`make run`): the cursor secret kept in
    `path` (under `.data/`, git-ignored), made there the first time, so that cursors a
    client holds still work after a restart. Only for that development mode and only when
    GRAPH_API_CURSOR_SECRET is not set; a hosted server sets the variable (see README)."""
    if settings.cursor_secret_configured or settings.backend != "embedded":
        return settings
    secret = _read_secret(path)
    if secret is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:  # O_EXCL: two servers starting at once agree on the first one's secret
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            secret = _read_secret(path)
        else:
            secret = secrets.token_bytes(_SECRET_BYTES)
            with os.fdopen(fd, "w") as file:
                file.write(secret.hex() + "\n")
        if secret is None:
            raise SettingsError(f"{path} is not a cursor secret: remove it to make a new one")
    return dataclasses.replace(settings, cursor_secret=secret, cursor_secret_file=str(path))


def _read_secret(path: Path) -> bytes | None:
    try:
        secret = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise SettingsError(f"{path} is not a cursor secret ({error}): remove it") from None
    if len(secret) < _SECRET_BYTES:
        raise SettingsError(f"{path} holds a cursor secret too short: remove it")
    return secret


def _int(
    env: Mapping[str, str], name: str, default: int, minimum: int = 0, maximum: int | None = None
) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"{name} must be at most {maximum}, not {value}")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise SettingsError(f"{name} must be a finite number of seconds more than 0, not {raw!r}")
    return value


# botocore's endpoint variables: without a scheme, botocore fails deep in a request.
ENDPOINT_VARIABLES = (
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_ENDPOINT_URL",
)


def check_endpoint(env: Mapping[str, str], name: str) -> None:
    """An endpoint variable, when set, is an http:// or https:// URL with a host."""
    raw = env.get(name, "").strip()
    if not raw:
        return
    scheme, host = _scheme_and_host(raw)
    if scheme not in ("http", "https") or not host:
        raise SettingsError(
            f"{name} must be a URL with a scheme, e.g. http://localhost:8000 or"
            f" https://dynamodb.eu-west-1.amazonaws.com, not {raw!r}"
        )


def _scheme_and_host(raw: str) -> tuple[str, str]:
    """A URL's scheme (lower case) and host; blanks when it has none or is malformed."""
    try:
        parts = urlsplit(raw)
        _ = parts.port  # raises ValueError when not a number
    except ValueError:
        return "", ""
    return parts.scheme.lower(), parts.hostname or ""


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _jwks_url(raw: str) -> str:
    """GRAPH_API_JWKS_URL: https://, or http:// on this machine (a test's issuer); keys from
    anywhere else could be swapped on the way."""
    if not raw:
        return raw
    scheme, host = _scheme_and_host(raw)
    if not host or not (scheme == "https" or (scheme == "http" and _loopback(host))):
        raise SettingsError(
            f"GRAPH_API_JWKS_URL must be an https:// URL (http:// only on localhost), not {raw!r}"
        )
    return raw


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = env.get(name, "").strip().lower() or default
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}")
    return value


def _auth(env: Mapping[str, str]) -> dict[str, Any]:
    jwks_url = _jwks_url(env.get("GRAPH_API_JWKS_URL", "").strip())
    secret = env.get("GRAPH_API_JWT_SECRET", "")
    issuer = env.get("GRAPH_API_JWT_ISSUER", "").strip()
    audience = env.get("GRAPH_API_JWT_AUDIENCE", "").strip()
    if jwks_url and secret:
        raise SettingsError("set GRAPH_API_JWKS_URL or GRAPH_API_JWT_SECRET, not both")
    if (jwks_url or secret) and not (issuer and audience):
        raise SettingsError(
            "auth needs GRAPH_API_JWT_ISSUER and GRAPH_API_JWT_AUDIENCE (tokens must match both)"
        )
    if secret and len(secret.encode()) < 32:
        raise SettingsError("GRAPH_API_JWT_SECRET must be at least 32 bytes (HS256)")
    return {
        "jwks_url": jwks_url,
        "jwt_secret": secret,
        "jwt_issuer": issuer,
        "jwt_audience": audience,
        "auth_reads": _bool(env, "GRAPH_API_AUTH_READS", False),
        "open_writes": _bool(env, "GRAPH_API_OPEN_WRITES", False),
        "roles_claim": _claim(env, "GRAPH_API_ROLES_CLAIM", "roles"),
        "student_claim": _claim(env, "GRAPH_API_STUDENT_CLAIM", "graph:student"),
        "teacher_claim": _claim(env, "GRAPH_API_TEACHER_CLAIM", "graph:teacher"),
        "guardian_claim": _claim(env, "GRAPH_API_GUARDIAN_CLAIM", "graph:students"),
    }


def _claim(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip() or default
    if any(c.isspace() for c in value):
        raise SettingsError(f"{name} names a claim: no blanks in {value!r}")
    return value


# `make run`'s default: a front end's dev server on this machine, whatever its port.
LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?"


def cors_origins(raw: str) -> str:
    """GRAPH_API_CORS_ORIGINS: origins as browsers send them (`scheme://host[:port]`, a
    trailing slash dropped), comma-separated, or `*`; the normalized comma list."""
    origins: list[str] = []
    for entry in (part.strip() for part in raw.split(",")):
        if entry == "*":
            origins.append(entry)
            continue
        if not entry:
            continue
        try:
            parts = urlsplit(entry)
            _ = parts.port  # raises ValueError when not a number
        except ValueError:
            parts = urlsplit("")
        if (
            parts.scheme.lower() not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise SettingsError(
                f"GRAPH_API_CORS_ORIGINS: {entry!r} is not an origin"
                " (scheme://host[:port], e.g. https://app.example.org) nor *"
            )
        origins.append(f"{parts.scheme.lower()}://{parts.netloc.lower()}")
    return ",".join(origins)


REDIS_SCHEMES = ("redis", "rediss")


def events_broker(raw: str) -> str:
    """GRAPH_API_EVENTS_BROKER: "memory" (empty too), or a Redis URL with a host. Errors never
    repeat the value: a URL may carry a password."""
    value = raw.strip()
    if value.lower() in ("", "memory"):
        return "memory"
    scheme, separator, _ = value.partition("://")
    if not separator or scheme.lower() not in REDIS_SCHEMES:
        raise SettingsError("GRAPH_API_EVENTS_BROKER must be memory or a redis:// or rediss:// URL")
    try:
        parts = urlsplit(value)
        host, _ = parts.hostname, parts.port  # .port raises ValueError when not a number
    except ValueError:
        raise SettingsError("GRAPH_API_EVENTS_BROKER is not a valid Redis URL") from None
    if not host:
        raise SettingsError("GRAPH_API_EVENTS_BROKER needs a host: redis://HOST:PORT")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def rate_limits(raw: str) -> str:
    """GRAPH_API_RATE_LIMITS checked: "", "off", or `role=maximum/rate` rows, comma-separated
    (`budget_rows` reads them)."""
    raw = raw.strip()
    if raw.lower() in ("", "off"):
        return raw.lower()
    budget_rows(raw)
    return raw


def budget_rows(raw: str) -> dict[str, tuple[int, int]]:
    """GRAPH_API_RATE_LIMITS's rows: by role, (maximum, restore rate), each at least 1."""
    from graph_api.graph.auth.policy import Role  # the policy's roles; it imports no settings

    rows: dict[str, tuple[int, int]] = {}
    example = "GRAPH_API_RATE_LIMITS must be off or rows like anonymous=50000/1000"
    for row in raw.split(","):
        role, _, budget = row.strip().partition("=")
        maximum, _, rate = budget.partition("/")
        if role.strip() not in {r.value for r in Role}:
            raise SettingsError(f"{example}; {role.strip()!r} is not a role")
        try:
            values = int(maximum), int(rate)
        except ValueError:
            raise SettingsError(f"{example}, not {row.strip()!r}") from None
        if min(values) < 1:
            raise SettingsError(f"{example}: maximum and rate at least 1, not {row.strip()!r}")
        rows[role.strip()] = values
    return rows


def _log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        raise SettingsError(f"GRAPH_API_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}")
    return level


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, not {raw!r}")


def _documents(env: Mapping[str, str]) -> dict[str, Any]:
    mode = _choice(env, "GRAPH_API_DOCUMENTS", ("any", "trusted"), "any")
    manifest = env.get("GRAPH_API_DOCUMENTS_MANIFEST", "").strip()
    if mode == "trusted" and not manifest:
        raise SettingsError(
            "GRAPH_API_DOCUMENTS=trusted needs GRAPH_API_DOCUMENTS_MANIFEST"
            " (a file `graph-api persist` writes)"
        )
    return {
        "documents": mode,
        "documents_manifest": manifest,
        "documents_max_age": _int(env, "GRAPH_API_DOCUMENTS_MAX_AGE", 60),
    }
