"""Where the stream reader reaches DynamoDB Streams when only DynamoDB's endpoint is set.

DynamoDB Local, moto and Alternator serve DynamoDB Streams at their DynamoDB URL; left to
botocore, `AWS_ENDPOINT_URL_DYNAMODB` alone sends the reader's polls to AWS's
streams.dynamodb.<region>.amazonaws.com, and a subscription never hears a write."""

from __future__ import annotations

import os

import pytest

from graph_api.settings import Settings
from graph_api.store.streams_client import Streams

AWS = "https://streams.dynamodb.us-east-1.amazonaws.com"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: str) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.path.join(tmp_path, "none"))
    return monkeypatch


@pytest.mark.parametrize(
    ("environment", "streams_at"),
    [
        ({}, AWS),
        ({"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8001"}, "http://127.0.0.1:8001"),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:8002"}, "http://127.0.0.1:8002"),
        (  # DynamoDB's own endpoint over the global one, as botocore picks DynamoDB's
            {"AWS_ENDPOINT_URL": "http://global:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://ddb:2"},
            "http://ddb:2",
        ),
        (  # Streams' own setting wins
            {
                "AWS_ENDPOINT_URL_DYNAMODB": "http://ddb:2",
                "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": "http://streams:3",
            },
            "http://streams:3",
        ),
        (  # botocore's switch to ignore configured endpoints is honoured
            {
                "AWS_ENDPOINT_URL_DYNAMODB": "http://ddb:2",
                "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
            },
            AWS,
        ),
    ],
)
def test_the_streams_endpoint_follows_the_dynamodb_endpoint_unless_set(
    clean_env: pytest.MonkeyPatch, environment: dict[str, str], streams_at: str
) -> None:
    for name, value in environment.items():
        clean_env.setenv(name, value)
    streams = Streams(Settings(backend="remote"))
    try:
        assert streams.endpoint == streams_at
    finally:
        streams.close()


def test_an_endpoint_the_process_started_serves_streams_too() -> None:
    streams = Streams(Settings(endpoint_url="http://127.0.0.1:9"))
    try:
        assert streams.endpoint == "http://127.0.0.1:9"
    finally:
        streams.close()
