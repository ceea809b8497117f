"""Faults neither emulator produces, injected at the HTTP layer through botocore's events.

A `before-send` handler that returns a response replaces DynamoDB's answer (so botocore's
own retry logic sees a real throttle or conflict), one that raises a connection error makes
botocore treat it as a dropped connection; an `after-call` handler edits a parsed response
(to return keys or items unprocessed, as DynamoDB does under load).
"""

from __future__ import annotations

import dataclasses
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from support import (
    AMZ_JSON,
    Body,
    Faults,
    HTTPServer,
    Reply,
    Result,
    awaited,
    class_count,
    error_response,
    execute,
    make_settings,
    scan,
    throttle,
)

from graph_api.errors import Unavailable
from graph_api.graph.engine.context import Services
from graph_api.ops import demo
from graph_api.ops.check import check_table
from graph_api.store import admin, retry
from graph_api.store.codec import Item
from graph_api.store.transactions import Stale
from graph_api.store.wire import MAX_BODY
from graph_api.writes import memberships
from graph_api.writes.attempts import KEPT_CHANGING


def conflict() -> AWSResponse:
    return error_response(
        "TransactionCanceledException",
        "Transaction cancelled, please refer cancellation reasons for specific reasons",
        CancellationReasons=[{"Code": "TransactionConflict"}, {"Code": "None"}, {"Code": "None"}],
    )


def reset() -> Exception:
    return ConnectionClosedError(endpoint_url="http://injected")


def timeout() -> Exception:
    return ReadTimeoutError(endpoint_url="http://injected")


@pytest.fixture
def quick(services: Services, request: pytest.FixtureRequest) -> Services:
    """The read table's services on a client of their own, with a deadline no busy machine
    reaches, or the short one a test that is about the deadline asks for (`short_deadline`)."""
    short = request.node.get_closest_marker("short_deadline") is not None
    settings = dataclasses.replace(services.settings, deadline_seconds=1.5 if short else 120.0)
    return Services.create(settings)


@pytest.fixture
def faults(quick: Services) -> Iterator[Faults]:
    injected = Faults(quick.dynamo)
    yield injected
    injected.undo()
    quick.close()


def students(items: list[Item], count: int) -> list[str]:
    return sorted(i["id"] for i in items if i["type"] == "student")[:count]


NAMES = "query($ids: [ID!]!) { students(ids: $ids) { id name } }"


# -- reads ------------------------------------------------------------------------------


def test_throttled_reads_are_retried_and_answered(
    quick: Services, faults: Faults, demo_items: list[Item]
) -> None:
    faults.fail("BatchGetItem", 3, throttle)
    ids = students(demo_items, 5)
    result = execute(quick, NAMES, {"ids": ids})
    assert result.errors == []
    assert [s["id"] for s in result.data["students"]] == ids
    # Three throttled attempts and the one that got through, all counted.
    assert result.extensions["dynamodb"]["requests"] == 4


@pytest.mark.parametrize("fault", [reset, timeout], ids=["connection reset", "read timeout"])
def test_dropped_connections_are_retried(
    quick: Services, faults: Faults, demo_items: list[Item], fault: Callable[[], Exception]
) -> None:
    faults.fail("Query", 2, fault)
    student = students(demo_items, 1)[0]
    result = execute(
        quick,
        "query($id: ID!) { student(id: $id) { classes { edges { node { id } } } } }",
        {"id": student},
    )
    assert result.errors == []
    enrolled = {
        i["classId"] for i in demo_items if i["type"] == "enrolment" and i["studentId"] == student
    }
    assert {e["node"]["id"] for e in result.data["student"]["classes"]["edges"]} == enrolled


@pytest.mark.short_deadline
def test_reads_past_the_deadline_fail_that_field_only(
    quick: Services, faults: Faults, demo_items: list[Item]
) -> None:
    faults.fail("BatchGetItem", None, throttle)  # throttled for good
    result = execute(
        quick,
        '{ student(id: "stu-0001") { name } sports(first: 3) { edges { node { id } } } }',
    )
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["path"] == ["student"]
    assert result.data["student"] is None
    assert len(result.data["sports"]["edges"]) == 3
    # The catalog's one Query, and the student's BatchGetItem attempts: bounded by the
    # deadline, or by the policy's count (1 + max_retries) if that comes first.
    assert 2 <= result.extensions["dynamodb"]["requests"] <= 2 + retry.REQUEST.max_retries


def test_unprocessed_keys_are_fetched_again(
    quick: Services, faults: Faults, demo_items: list[Item]
) -> None:
    def hold_back_half(parsed: dict[str, Any]) -> None:
        (name,) = parsed["Responses"]
        got = parsed["Responses"][name]
        parsed["Responses"][name], held = got[: len(got) // 2], got[len(got) // 2 :]
        keys = [{"PK": i["PK"], "SK": i["SK"]} for i in held]
        parsed["UnprocessedKeys"] = {name: {"Keys": keys, "ConsistentRead": False}}

    faults.edit("BatchGetItem", 2, hold_back_half)
    ids = students(demo_items, 40)
    result = execute(quick, NAMES, {"ids": ids})
    assert result.errors == []
    assert [s["id"] for s in result.data["students"]] == ids
    calls = [c.operation for c in result.context.ledger.calls]
    assert calls.count("BatchGetItem") == 3


# -- writes -----------------------------------------------------------------------------


@pytest.fixture
def school(endpoint: str) -> Iterator[Services]:
    """A small writable school with a short deadline."""
    services = Services.create(make_settings(endpoint, deadline_seconds=1.5))
    awaited(admin.create(services.dynamo, services.settings.table))
    awaited(admin.batch_write(services.dynamo, services.settings.table, demo.generate(6, 2)))
    yield services
    awaited(
        services.dynamo.call(
            "DeleteTable", {"TableName": services.settings.table}, None, missing_table=False
        )
    )
    services.close()


def a_free_class(services: Services) -> tuple[str, str]:
    items = scan(services)
    enrolled = {(i["studentId"], i["classId"]) for i in items if i["type"] == "enrolment"}
    classes = sorted(i["id"] for i in items if i["type"] == "class")
    student = next(i["id"] for i in items if i["type"] == "student")
    return student, next(c for c in classes if (student, c) not in enrolled)


ENROL = """mutation($s: ID!, $c: ID!) {
  enrollStudent(studentId: $s, classId: $c) { class { studentCount } userErrors { code } } }"""


def enrol(services: Services, student: str, klass: str) -> Result:
    return execute(services, ENROL, {"s": student, "c": klass})


def test_transaction_conflicts_are_retried_with_the_same_token(roomy_school: Services) -> None:
    school = roomy_school  # about the token, not the deadline
    student, klass = a_free_class(school)
    before = class_count(school, klass)
    faults = Faults(school.dynamo)
    faults.fail("TransactWriteItems", 2, conflict)
    try:
        result = enrol(school, student, klass)
    finally:
        faults.undo()
    assert result.errors == []
    assert result.data["enrollStudent"] == {
        "class": {"studentCount": before + 1},
        "userErrors": [],
    }
    tokens = {body["ClientRequestToken"] for body in faults.sent}
    assert len(faults.sent) == 3 and len(tokens) == 1
    assert awaited(check_table(school.dynamo, school.settings.table)) == []


@pytest.mark.parametrize(
    "fault", [throttle, conflict, reset], ids=["throttle", "conflict", "reset"]
)
def test_writes_that_keep_failing_are_unavailable_and_change_nothing(
    school: Services, fault: Callable[[], Any]
) -> None:
    student, klass = a_free_class(school)
    before = scan(school)
    faults = Faults(school.dynamo)
    faults.fail("TransactWriteItems", None, fault)
    try:
        result = enrol(school, student, klass)
    finally:
        faults.undo()
    assert result.codes == ["UNAVAILABLE"]
    assert result.data == {"enrollStudent": None}
    assert scan(school) == before
    assert awaited(check_table(school.dynamo, school.settings.table)) == []


def test_seeding_retries_unprocessed_items(endpoint: str) -> None:
    services = Services.create(make_settings(endpoint))
    name = services.settings.table
    awaited(admin.create(services.dynamo, name))
    faults = Faults(services.dynamo)

    def hold_back_some(parsed: dict[str, Any]) -> None:
        # DynamoDB wrote them after all; re-putting an item is harmless, losing one is not.
        sent = faults.sent[-1]["RequestItems"][name]
        parsed["UnprocessedItems"] = {name: sent[:5]}

    faults.fail("BatchWriteItem", 0, lambda: None)  # records the requests only
    faults.edit("BatchWriteItem", 3, hold_back_some)
    items = demo.generate(4, 9)
    try:
        awaited(admin.batch_write(services.dynamo, name, items))
    finally:
        faults.undo()
        assert len(scan(services)) == len(items)
        awaited(services.dynamo.call("DeleteTable", {"TableName": name}, None, missing_table=False))
        services.close()
    assert len(faults.sent) == (len(items) + 24) // 25 + 3


# -- the retry policy (graph_api/store/retry.py) ------------------------------------------


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> retry.Policy:
    """The request policy's count, with sleeps of a millisecond or two: the count, not the
    deadline, is what stops these requests."""
    fast = dataclasses.replace(retry.REQUEST, base=0.0005, cap=0.002)
    monkeypatch.setattr(retry, "REQUEST", fast)
    return fast


STUDENT = '{ student(id: "stu-0001") { name } }'


def test_a_table_that_throttles_every_call_gets_the_policys_retries_not_a_product(
    quick: Services, faults: Faults, quick_retries: retry.Policy
) -> None:
    student, klass = a_free_class(quick)  # refused below throughout: nothing is written
    faults.fail(None, None, throttle)  # every call of every operation
    result = execute(quick, STUDENT)
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["message"] == "DynamoDB is busy; try again shortly"
    # One call, sent again as many times as the policy allows, and no more.
    assert result.extensions["dynamodb"]["requests"] == 1 + quick_retries.max_retries == 13
    assert len(faults.sent) == 13

    # A write's loops nest (read again > transaction > call) but share the count: reads
    # that pass and a transaction throttled 13 times stop after 12 retries in all (before:
    # 8 x 8, 24 times over if it went stale). Conflicts between the throttles are retried
    # on a count of their own (they are contention, not DynamoDB failing): 13 of them.
    faults.undo()
    turns = iter([conflict, throttle] * 20)
    faults.fail("TransactWriteItems", None, lambda: next(turns)())
    result = enrol(quick, student, klass)
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["message"] == "DynamoDB is busy; try again shortly"
    transactions = [body for body in faults.sent if "TransactItems" in body]
    assert len(transactions) == 26
    assert len({body["ClientRequestToken"] for body in transactions}) == 1
    assert result.context.table.retries.count == 12
    assert result.context.table.retries.conflicts == 13


def test_a_drained_budget_fails_requests_fast_until_successes_refill_it(
    quick: Services, faults: Faults, quick_retries: retry.Policy
) -> None:
    budget = quick.dynamo.budget
    assert budget.available == budget.capacity == 500
    faults.fail(None, None, throttle)
    retries_taken = []
    while True:  # throttled requests, each taking what retries the budget still pays for
        result = execute(quick, STUDENT)
        assert result.codes == ["UNAVAILABLE"]
        retries_taken.append(result.context.table.retries.count)
        if retries_taken[-1] < quick_retries.max_retries:
            break
    # 500 tokens at 5 a throttle: 100 retries, shared by every request of the process.
    assert sum(retries_taken) == 100 and budget.available == 0
    assert result.errors[0]["message"].endswith(f"({retry.BUDGET_SPENT})")

    # Empty: the next request makes its one attempt and fails at once, however young its
    # deadline is.
    sent = len(faults.sent)
    result = execute(quick, STUDENT)
    assert result.codes == ["UNAVAILABLE"]
    assert len(faults.sent) - sent == 1
    assert result.extensions["dynamodb"]["requests"] == 1

    # DynamoDB answers again: each call that succeeds refills a token...
    faults.undo()
    for n in range(1, 6):
        assert execute(quick, STUDENT).errors == []
        assert budget.available == n
    # ...and with 5 a throttle is retried again; the retry that succeeds gives its 5 back.
    faults.fail("BatchGetItem", 1, throttle)
    result = execute(quick, STUDENT)
    assert result.errors == []
    assert result.extensions["dynamodb"]["requests"] == 2
    assert budget.available == 5


def test_a_write_whose_reads_keep_going_stale_gives_up_after_the_policys_retries(
    roomy_school: Services, monkeypatch: pytest.MonkeyPatch, quick_retries: retry.Policy
) -> None:
    school = roomy_school  # the policy's count stops it, not the deadline
    student, klass = a_free_class(school)
    before = scan(school)
    attempts = []

    async def always_stale(*_: Any, **__: Any) -> None:
        attempts.append(None)
        raise Stale()  # someone wrote what the attempt read, every time

    monkeypatch.setattr(memberships, "transact", always_stale)
    result = enrol(school, student, klass)
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["message"] == KEPT_CHANGING
    # Read, write, stale: 1 + 12 times (before: 24), each attempt reading both nodes again.
    assert len(attempts) == 1 + quick_retries.max_retries == 13
    reads = [c.operation for c in result.context.ledger.calls]
    assert reads == ["BatchGetItem"] * 13
    assert scan(school) == before


def test_throttled_reads_and_stale_writes_share_one_count(
    roomy_school: Services, monkeypatch: pytest.MonkeyPatch, quick_retries: retry.Policy
) -> None:
    school = roomy_school  # the policy's count stops it, not the deadline
    student, klass = a_free_class(school)
    attempts = []

    async def always_stale(*_: Any, **__: Any) -> None:
        attempts.append(None)
        raise Stale()

    monkeypatch.setattr(memberships, "transact", always_stale)
    faults = Faults(school.dynamo)
    turns = iter([True, False] * 20)  # every other read is throttled
    faults.fail("BatchGetItem", None, lambda: throttle() if next(turns) else None)
    try:
        result = enrol(school, student, klass)
    finally:
        faults.undo()
    # 12 retries in all, by turns after a throttled read and after a stale write; the
    # 13th read is throttled with none left, and the request stops there.
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["message"] == "DynamoDB is busy; try again shortly"
    assert result.context.table.retries.count == 12
    assert len(attempts) == 6
    assert result.extensions["dynamodb"]["requests"] == 13


def test_the_budget_refills_as_botocore_s_retry_quota_does() -> None:
    budget = retry.RetryBudget()
    retries = retry.Retries(budget, policy=retry.Policy(base=0.0, cap=0.0, max_retries=50))
    assert awaited(retries.pause(retry.Failure.THROTTLED, "busy")) == 5
    assert awaited(retries.pause(retry.Failure.TRANSIENT, "gone")) == 14
    assert awaited(retries.pause(retry.Failure.CONTENTION, "stale")) == 1
    assert budget.available == 500 - 20
    retries.answered(14)  # a call that succeeded after a retry gives back its cost
    retries.answered(0)  # one that succeeded at once gives 1
    retries.recovered(1)  # a loop that got there after a retry gives back that retry's
    assert budget.available == 500 - 4
    budget.refill(100)
    assert budget.available == 500  # never past its capacity


def test_a_retry_that_would_sleep_past_the_deadline_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budget = retry.RetryBudget()
    slow = retry.Policy(base=1.0, cap=1.0, max_retries=5)
    deadline = time.monotonic() + 0.01
    retries = retry.Retries(budget, deadline, slow)
    assert 0 < retries.remaining() <= 0.01
    # Each sleep asked for, beside what was left of the deadline then: not the clock, which a
    # busy machine moves on while nothing sleeps.
    slept: list[tuple[float, float]] = []

    async def record(delay: float) -> None:
        slept.append((delay, retries.remaining()))

    monkeypatch.setattr(retry, "sleep", record)
    with pytest.raises(Unavailable):
        for _ in range(6):  # a draw below what is left is possible (the 6th stops anyway)
            awaited(retries.pause(retry.Failure.THROTTLED, "busy"))
    assert all(delay < left for delay, left in slept), slept  # never past it

    # Past it: no retry, nothing spent. DynamoDB's failures say it did not answer in time;
    # contention keeps its own words, which say what became of the write.
    late = retry.Retries(budget, time.monotonic(), slow)
    left = budget.available
    with pytest.raises(Unavailable) as stopped:
        awaited(late.pause(retry.Failure.THROTTLED, "busy"))
    assert stopped.value.message == retry.LATE
    with pytest.raises(Unavailable) as stopped:
        awaited(late.pause(retry.Failure.CONTENTION, "kept changing"))
    assert stopped.value.message == "kept changing"
    assert late.count == 0 and budget.available == left


def unavailable(cause: BaseException) -> Unavailable:
    """An error as `Dynamo.call` raises it."""
    error = Unavailable("DynamoDB is busy or unreachable")
    error.__cause__ = cause
    return error


def refusal(code: str, *reasons: str) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": "injected"}}
    if reasons:
        response["CancellationReasons"] = [{"Code": reason} for reason in reasons]
    return ClientError(response, "TransactWriteItems")


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (unavailable(refusal("ThrottlingException")), "THROTTLED"),
        (unavailable(refusal("InternalServerError")), "TRANSIENT"),
        (unavailable(ConnectionClosedError(endpoint_url="x")), "TRANSIENT"),
        (unavailable(ReadTimeoutError(endpoint_url="x")), "TRANSIENT"),
        (unavailable(EndpointConnectionError(endpoint_url="x")), None),  # nobody listens
        (Unavailable("this request's deadline passed"), None),  # ours: final
        (refusal("TransactionCanceledException", "None", "TransactionConflict"), "CONFLICT"),
        (refusal("TransactionConflictException"), "CONFLICT"),  # a plain write of a held item
        (refusal("TransactionCanceledException", "ThrottlingError", "None"), "THROTTLED"),
        (
            refusal("TransactionCanceledException", "TransactionConflict", "ThrottlingError"),
            "THROTTLED",
        ),
        (refusal("TransactionCanceledException", "ConditionalCheckFailed"), None),
        # A failed condition is the caller's answer, whatever else was held meanwhile.
        (
            refusal(
                "TransactionCanceledException", "ConditionalCheckFailed", "TransactionConflict"
            ),
            None,
        ),
        (refusal("TransactionInProgressException"), "CONFLICT"),
        (refusal("ValidationException"), None),
    ],
)
def test_what_is_sent_again(error: Exception, failure: str | None) -> None:
    found = retry.failure_of(error)
    assert (found.name if found else None) == failure


# -- answers that are not DynamoDB's ------------------------------------------------------


def answer(status: int, body: bytes, **headers: str) -> AWSResponse:
    return AWSResponse("http://injected", status, {"Content-Type": AMZ_JSON, **headers}, Body(body))


HTML = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


def html_200(_: str) -> AWSResponse:
    return answer(200, HTML, **{"Content-Type": "text/html"})


def empty_object(_: str) -> AWSResponse:
    return answer(200, b"{}")


def html_503(_: str) -> AWSResponse:
    return answer(503, HTML, **{"Content-Type": "text/html"})


def garbage_500(_: str) -> AWSResponse:
    return answer(500, b"\x00\xffnot json at all")


def null_503(_: str) -> AWSResponse:
    """A proxy's error in JSON that is not an object: botocore's error parsing trips on it."""
    return answer(503, b"null")


# Well-formed answers of each operation, as DynamoDB writes them with ReturnConsumedCapacity.
WELL_FORMED = {
    "BatchGetItem": b'{"Responses": {}, "UnprocessedKeys": {}, "ConsumedCapacity": []}',
    "Query": b'{"Items": [], "Count": 0, "ScannedCount": 0, "ConsumedCapacity": {}}',
    "TransactWriteItems": b'{"ConsumedCapacity": []}',
}


def bad_checksum(operation: str) -> AWSResponse:
    """A well-formed answer whose `x-amz-crc32` is not its body's."""
    body = WELL_FORMED[operation]
    return answer(200, body, **{"x-amz-crc32": str((zlib.crc32(body) + 1) & 0xFFFFFFFF)})


NOT_DYNAMODB = [html_200, empty_object, html_503, garbage_500, null_503, bad_checksum]
NOT_DYNAMODB_IDS = ["HTML 200", "{} 200", "HTML 503", "garbage 500", "null 503", "bad x-amz-crc32"]


def test_a_well_formed_answer_with_its_checksum_is_taken(
    quick: Services, faults: Faults, demo_items: list[Item]
) -> None:
    """The faults below differ from DynamoDB's answers only in what they break."""
    body = WELL_FORMED["Query"]
    faults.fail("Query", 1, lambda: answer(200, body, **{"x-amz-crc32": str(zlib.crc32(body))}))
    result = execute(quick, "{ sports(first: 3) { edges { node { id } } } }")
    assert result.errors == []
    assert result.data == {"sports": {"edges": []}}


@pytest.mark.parametrize("fault", NOT_DYNAMODB, ids=NOT_DYNAMODB_IDS)
def test_answers_that_are_not_dynamodbs_are_retried(
    quick: Services, faults: Faults, demo_items: list[Item], fault: Callable[[str], AWSResponse]
) -> None:
    faults.fail("BatchGetItem", 2, lambda: fault("BatchGetItem"))
    ids = students(demo_items, 5)
    result = execute(quick, NAMES, {"ids": ids})
    assert result.errors == []
    assert [s["id"] for s in result.data["students"]] == ids
    assert result.extensions["dynamodb"]["requests"] == 3


@pytest.mark.parametrize("operation", ["BatchGetItem", "Query"])
@pytest.mark.parametrize("fault", NOT_DYNAMODB, ids=NOT_DYNAMODB_IDS)
def test_reads_never_take_an_answer_that_is_not_dynamodbs_for_an_empty_one(
    quick: Services,
    faults: Faults,
    demo_items: list[Item],
    quick_retries: retry.Policy,
    fault: Callable[[str], AWSResponse],
    operation: str,
) -> None:
    faults.fail(operation, None, lambda: fault(operation))
    if operation == "BatchGetItem":
        field, query = "students", f'{{ students(ids: ["{students(demo_items, 1)[0]}"]) {{ id }} }}'
    else:
        field, query = "sports", "{ sports(first: 3) { edges { node { id } } } }"
    result = execute(quick, query)
    assert result.codes == ["UNAVAILABLE"]
    assert result.data is None or result.data[field] is None
    assert result.extensions["dynamodb"]["requests"] == 1 + quick_retries.max_retries


@pytest.fixture
def roomy_school(endpoint: str) -> Iterator[Services]:
    """A small writable school with a deadline no busy machine reaches."""
    services = Services.create(make_settings(endpoint, deadline_seconds=120.0))
    awaited(admin.create(services.dynamo, services.settings.table))
    awaited(admin.batch_write(services.dynamo, services.settings.table, demo.generate(6, 2)))
    yield services
    awaited(
        services.dynamo.call(
            "DeleteTable", {"TableName": services.settings.table}, None, missing_table=False
        )
    )
    services.close()


@pytest.mark.parametrize("fault", NOT_DYNAMODB, ids=NOT_DYNAMODB_IDS)
def test_a_write_answered_by_something_else_is_unavailable_never_written(
    roomy_school: Services, quick_retries: retry.Policy, fault: Callable[[str], AWSResponse]
) -> None:
    school = roomy_school
    student, klass = a_free_class(school)
    before = scan(school)
    faults = Faults(school.dynamo)
    faults.fail("TransactWriteItems", None, lambda: fault("TransactWriteItems"))
    try:
        result = enrol(school, student, klass)
    finally:
        faults.undo()
    assert result.codes == ["UNAVAILABLE"]
    assert result.data == {"enrollStudent": None}
    assert len(faults.sent) == 1 + quick_retries.max_retries  # retried within the policy
    assert scan(school) == before


# -- an endpoint that sends more than DynamoDB ever does ------------------------------------


def _endless(sent: list[int], *, chunked: bool) -> Reply:
    """Answers with a body that goes on (1 GB, if nothing stops it), chunked or under a
    `Content-Length` of 4 GB; records how much it could send before the client hung up."""

    def reply(conn: socket.socket, _: bytes) -> bool:
        framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: 4294967296"
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
            + framing
            + b"\r\n\r\n"
        )
        block = b" " * 65536
        piece = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block
        total = 0
        try:
            while total < 1 << 30:
                conn.sendall(piece)
                total += len(piece)
        except OSError:  # the client closed the connection
            pass
        sent.append(total)
        return False

    return reply


@pytest.mark.parametrize("kind", ["4 GB Content-Length", "endless chunks"])
def test_an_answer_larger_than_dynamodb_sends_is_cut_and_unavailable(
    kind: str, quick_retries: retry.Policy
) -> None:
    sent: list[int] = []
    server = HTTPServer(_endless(sent, chunked=kind == "endless chunks"))
    services = Services.create(
        make_settings(f"http://127.0.0.1:{server.port}", deadline_seconds=60.0)
    )
    try:
        result = execute(services, '{ student(id: "stu-0001") { name } }')
    finally:
        services.close()
        server.close()
    assert result.codes == ["UNAVAILABLE"]
    assert result.data == {"student": None}
    # Each attempt stopped reading near the cap (16 MB, and what the sockets' buffers held),
    # or at once for a length over it.
    assert sent
    assert all(total < MAX_BODY + (16 << 20) for total in sent)
    assert server.connections == result.extensions["dynamodb"]["requests"]
    assert server.connections == 1 + quick_retries.max_retries


# -- a client that could not be opened ------------------------------------------------------


def test_credentials_that_failed_to_resolve_are_resolved_again_by_the_next_request(
    services: Services, monkeypatch: pytest.MonkeyPatch, demo_items: list[Item]
) -> None:
    """Resolving the credentials can fail (not yet to be had from the task role): that
    request gets a coded error, and the next one on the same loop resolves them again."""
    import asyncio

    import botocore.credentials
    from support import execute_async

    from graph_api.store.credentials import BotocoreCredentials

    failures = [EndpointConnectionError(endpoint_url="https://credentials.invalid")]

    class Session:
        def get_credentials(self) -> Any:
            if failures:
                raise failures.pop()
            return botocore.credentials.Credentials("local", "local")

    monkeypatch.setattr(services.dynamo, "credentials", BotocoreCredentials(Session))  # type: ignore[arg-type]
    ids = students(demo_items, 2)

    async def twice() -> tuple[Result, Result]:
        first = await execute_async(services, NAMES, {"ids": ids})
        second = await execute_async(services, NAMES, {"ids": ids})
        await services.dynamo.aclose()
        return first, second

    first, second = asyncio.run(twice())
    assert first.codes == ["UNAVAILABLE"]
    assert second.errors == []
    assert [s["id"] for s in second.data["students"]] == ids


def html_405(_: str) -> AWSResponse:
    """A web server (or another API) where the DynamoDB endpoint should be."""
    return answer(
        405, b"<html><body><h1>405 Not Allowed</h1></body></html>", **{"Content-Type": "text/html"}
    )


def test_an_endpoint_that_is_not_dynamodb_is_said_so_at_once_not_retried(
    quick: Services, faults: Faults, demo_items: list[Item]
) -> None:
    faults.fail("BatchGetItem", None, lambda: html_405("BatchGetItem"))
    result = execute(quick, NAMES, {"ids": students(demo_items, 2)})
    assert result.codes == ["UNAVAILABLE"]
    message = result.errors[0]["message"]
    assert "HTTP 405" in message and "AWS_ENDPOINT_URL_DYNAMODB" in message
    assert "busy" not in message
    assert result.extensions["dynamodb"]["requests"] == 1  # not 1 + the policy's retries
