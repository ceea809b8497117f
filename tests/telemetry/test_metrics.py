"""`GET /metrics`: Prometheus' text format, read back with prometheus_client's own parser, and
the figures an operator graphs moving with the traffic that makes them (README,
"Observability")."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from support import RENAME_TEACHER, live, mutate, subscriber, teacher, until

from graph_api import telemetry
from graph_api.events.changes import Event, Position
from graph_api.events.hub import Hub
from graph_api.settings import Settings

READS = ("GetItem", "BatchGetItem", "Query")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

QUERY = 'query FindTheClass { class(id: "cls-007") { subject teacher { name } } }'


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def total(samples: Samples, name: str, operations: tuple[str, ...] = ()) -> float:
    return sum(
        value
        for (sample, labels), value in samples.items()
        if sample == name and (not operations or dict(labels)["operation"] in operations)
    )


def post(client: TestClient, query: str) -> dict[str, Any]:
    body: dict[str, Any] = client.post("/graphql", json={"query": query}).json()
    return body


def test_a_query_moves_its_histogram_and_the_dynamodb_figures_it_cost(client: TestClient) -> None:
    before = scrape(client)
    body = post(client, QUERY)
    assert body["data"]["class"]["subject"]
    after = scrape(client)

    histogram = "graph_api_graphql_request_duration_seconds"
    query_ok = {"operation_type": "query", "outcome": "ok"}
    assert moved(before, after, f"{histogram}_count", **query_ok) == 1
    assert moved(before, after, f"{histogram}_bucket", le="+Inf", **query_ok) == 1
    assert moved(before, after, f"{histogram}_sum", **query_ok) > 0
    # The same DynamoDB reads and capacity as the response's own accounting says (the
    # event pipeline's lease writes and stream polls run beside it).
    cost = body["extensions"]["dynamodb"]
    requests = "graph_api_dynamodb_requests_total"
    assert total(after, requests, READS) - total(before, requests, READS) == cost["requests"]
    capacity = "graph_api_dynamodb_consumed_capacity_total"
    spent = total(after, capacity, READS) - total(before, capacity, READS)
    assert abs(spent - cost["consumedCapacity"]) < 0.01
    # No label carries the operation's text, its name or an id.
    for _, labels in after:
        for _, value in labels:
            assert "FindTheClass" not in value and "cls-007" not in value


def test_errors_are_counted_by_code_and_refused_operations_by_outcome(client: TestClient) -> None:
    before = scrape(client)
    unknown_field = post(client, "{ nosuchfield }")
    unparsable = post(client, "{ class(")
    after = scrape(client)

    for body in (unknown_field, unparsable):
        (error,) = body["errors"]
        code = error["extensions"]["code"]
        assert moved(before, after, "graph_api_graphql_errors_total", code=code) >= 1
    errors = "graph_api_graphql_errors_total"
    assert total(after, errors) - total(before, errors) == 2
    histogram = "graph_api_graphql_request_duration_seconds_count"
    # Validated, so a query; the other never parsed, so its type is unknown.
    assert moved(before, after, histogram, operation_type="query", outcome="error") == 1
    assert moved(before, after, histogram, operation_type="unknown", outcome="error") == 1


def test_subscriptions_open_and_their_events_delivered(endpoint: str) -> None:
    with live(endpoint) as (client, services), subscriber(client, services) as sub:
        before = scrape(client)
        sub.subscribe("t", 'subscription { teacherChanged(id: "t1") { kind } }')
        assert moved(before, scrape(client), "graph_api_subscriptions_open") == 1
        teacher(client, "t1", "Ada")
        assert sub.event("t") == {"teacherChanged": {"kind": "CREATED"}}
        mutate(client, RENAME_TEACHER, {"id": "t1", "name": "Ada L."})
        assert sub.event("t") == {"teacherChanged": {"kind": "UPDATED"}}
        sub.complete("t")
        until(lambda: services.events.hub.size == 0, "the subscription's end")
        after = scrape(client)
    assert moved(before, after, "graph_api_subscription_events_delivered_total") == 2
    assert moved(before, after, "graph_api_subscriptions_open") == 0


def test_events_of_a_subscriber_that_fell_behind_are_counted_as_shed() -> None:
    telemetry.enable(Settings(cursor_secret=b""))  # as Services.create does
    hub = Hub(max_subscriptions=10, queue_limit=2)
    subscription = hub.subscribe(["Teacher:t1"])
    delivered, shed = (
        "graph_api_subscription_events_delivered_total",
        "graph_api_subscription_events_shed_total",
    )
    before = {name: REGISTRY.get_sample_value(name) or 0.0 for name in (delivered, shed)}
    for sequence in range(1, 4):  # the third finds the queue full: all three are dropped
        hub.deliver([Event("Teacher:t1", "UPDATED", "t1", None, Position("s", sequence))])
    # None reached the subscriber: counted as shed only, never as delivered.
    assert (REGISTRY.get_sample_value(delivered) or 0.0) - before[delivered] == 0
    assert (REGISTRY.get_sample_value(shed) or 0.0) - before[shed] == 3
    subscription.close()


def test_metrics_on_a_remote_backend_are_off_the_apis_port_unless_asked() -> None:
    """A remote backend's API port is often public: /metrics is not on it by default; on a
    port of its own when GRAPH_API_METRICS_PORT names one; the embedded demo keeps it."""
    remote = {"GRAPH_API_BACKEND": "remote"}
    assert not Settings.from_env(remote).metrics
    on_port = Settings.from_env({**remote, "GRAPH_API_METRICS_PORT": "9464"})
    assert (on_port.metrics, on_port.metrics_port, on_port.metrics_host) == (
        True,
        9464,
        "127.0.0.1",
    )
    asked = Settings.from_env({**remote, "GRAPH_API_METRICS": "true"})
    assert asked.metrics and not asked.metrics_port  # on the API's port, as asked
    embedded = Settings.from_env({"GRAPH_API_BACKEND": "embedded"})
    assert embedded.metrics and not embedded.metrics_port
    lambda_ = Settings.from_env({**remote, "AWS_LAMBDA_FUNCTION_NAME": "f"})
    assert not lambda_.metrics


def test_metrics_on_a_port_of_their_own_and_not_on_the_apis(endpoint: str) -> None:
    import urllib.request

    from tools.processes import free_port

    port = free_port()
    with live(endpoint, metrics_port=port) as (client, _):
        post(client, QUERY)
        assert client.get("/metrics").status_code == 404
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as got:
            text = got.read().decode()
        names = {family.name for family in text_string_to_metric_families(text)}
        assert "graph_api_graphql_request_duration_seconds" in names
