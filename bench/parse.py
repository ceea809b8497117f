"""CPU per DynamoDB call with botocore's response parser and with ours (store/response_parser.py).

Starts a DynamoDB Local, seeds the demo school (seed 11, as `make bench`), then for a
BatchGetItem of 30 students and a class roster Query measures, in this process:

- parse: CPU to parse the recorded HTTP response (botocore's `JSONParser` vs ours);
- call: CPU of a whole boto3 call (serialize, sign, send, parse), with a client built on
  botocore's stock factory and one built as `Dynamo` builds it.

    .venv/bin/python -m bench.parse [--students 500] [--rounds 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import boto3
import botocore.session
from botocore.parsers import ResponseParserFactory
from graph_api.store.response_parser import DynamoResponseParserFactory

from graph_api.model.keys import Kind, node, roster
from graph_api.ops import demo
from graph_api.settings import Settings
from graph_api.store import admin, codec
from graph_api.store.client import LOCAL_CREDENTIALS, Dynamo
from tools import dynamodb_local

TABLE = "parse-bench"


def cpu_us(pair: tuple[Callable[[], Any], Callable[[], Any]], rounds: int) -> list[float]:
    """Median CPU microseconds (this process, all threads) of one call of each of `pair`,
    alternated round by round so that a busy machine weighs on both alike."""
    samples: list[list[int]] = [[], []]
    for _ in range(rounds):
        for work, kept in zip(pair, samples, strict=True):
            started = time.process_time_ns()
            work()
            kept.append(time.process_time_ns() - started)
    return [statistics.median(kept) / 1000 for kept in samples]


def client(endpoint: str, factory: ResponseParserFactory) -> Any:
    session = botocore.session.get_session()
    session.register_component("response_parser_factory", factory)
    return boto3.session.Session(botocore_session=session).client(
        "dynamodb", endpoint_url=endpoint, region_name="us-east-1", **LOCAL_CREDENTIALS
    )


def record(dynamo: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """The HTTP response dict botocore hands its parser for one call."""
    seen: dict[str, Any] = {}

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        seen.update(response_dict)

    dynamo.meta.events.register(f"before-parse.dynamodb.{operation}", keep)
    getattr(dynamo, {"BatchGetItem": "batch_get_item", "Query": "query"}[operation])(**params)
    dynamo.meta.events.unregister(f"before-parse.dynamodb.{operation}", keep)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()

    items = demo.generate(students=args.students, seed=11)
    running = dynamodb_local.start()
    try:
        settings = Settings(
            table=TABLE, backend="embedded", endpoint_url=running.endpoint, region="us-east-1"
        )
        dynamo = Dynamo(settings)
        admin.create(dynamo, TABLE)
        admin.batch_write(dynamo, TABLE, items)

        students = [i["id"] for i in items if i.get("type") == "student"][:30]
        batch = {
            "RequestItems": {
                TABLE: {"Keys": [codec.encode(node(Kind.STUDENT, s).as_item()) for s in students]}
            },
            "ReturnConsumedCapacity": "TOTAL",
        }
        rng = roster(Kind.CLASS, "cls-001", Kind.STUDENT)
        query = {
            "TableName": TABLE,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": rng.pk}, ":prefix": {"S": rng.prefix}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        stock = client(running.endpoint, ResponseParserFactory())
        fast = client(running.endpoint, DynamoResponseParserFactory())
        model = stock.meta.service_model
        print(f"{args.students} demo students, median of {args.rounds} rounds, CPU µs per call")
        print("| call | bytes | items | botocore parse | our parse | botocore call | our call |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for operation, params, method in (
            ("BatchGetItem", batch, "batch_get_item"),
            ("Query", query, "query"),
        ):
            response = record(stock, operation, params)
            shape = model.operation_model(operation).output_shape
            theirs = ResponseParserFactory().create_parser("json")
            ours = DynamoResponseParserFactory().create_parser("json")
            parsed = theirs.parse(response, shape)
            assert ours.parse(response, shape) == parsed
            count = len(parsed["Items"] if "Items" in parsed else parsed["Responses"][TABLE])
            row = [
                *cpu_us(
                    (partial(theirs.parse, response, shape), partial(ours.parse, response, shape)),
                    args.rounds,
                ),
                *cpu_us(
                    (
                        partial(getattr(stock, method), **params),
                        partial(getattr(fast, method), **params),
                    ),
                    args.rounds,
                ),
            ]
            cells = " | ".join(f"{v:,.0f}" for v in row)
            print(f"| {operation} | {len(response['body']):,} | {count} | {cells} |")
        dynamo.close()
    finally:
        running.stop()


if __name__ == "__main__":
    main()
