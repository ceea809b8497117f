"""Writes that meet on one item, behind a front that contends as AWS does (tools/contention.py):
every item of a transaction held 15 ms, another transaction touching it cancelled for
`TransactionConflict`. Sixteen writers into one class, one sport or one city all succeed,
and every count is exact afterwards: in one process they take turns
(`store/item_locks.py`); separate instances meet at DynamoDB and their conflicts are retried
(`store/retry.py`)."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from racing import CREATE_STUDENT_MIN, all_ok
from support import (
    ENROLL_MIN,
    USER_ERRORS,
    Faults,
    Result,
    assert_clean,
    awaited,
    close_services,
    create_class,
    create_sport,
    create_student,
    create_teacher,
    execute,
    execute_async,
    get_item,
    gql_of,
    keep_loop,
    ok,
    roster,
    run_on,
    scan,
    walk,
    wire_key,
)

from graph_api.errors import Unavailable
from graph_api.graph.engine.context import Services
from graph_api.model import keys
from graph_api.store import retry, transactions
from graph_api.store.client import LOCAL_CREDENTIALS
from graph_api.store.item_locks import ItemLocks
from graph_api.store.table import Table
from tools.contention import ONGOING, ContentionFront, cancelled

pytestmark = pytest.mark.settings(deadline_seconds=60.0)  # a busy machine, not the policy

WRITERS = 16
HOLD = 0.015  # seconds an item stays locked per transaction: AWS's commit time
HOME = {"country": "Canada", "state": "Ontario", "city": "Ottawa"}


@pytest.fixture
def front(svc: Services) -> Iterator[ContentionFront]:
    contending = ContentionFront(hold=HOLD)
    yield contending
    contending.detach()


@pytest.fixture
def other_instance(svc: Services) -> Iterator[Services]:
    """A second API instance on the same table: a client, a retry budget and item locks of
    its own."""
    other = keep_loop(Services.create(svc.settings))
    yield other
    close_services(other)


def at_once(
    instances: Sequence[Services], operations: Sequence[tuple[str, dict[str, Any]]]
) -> list[Result]:
    """`operations` on one event loop, WRITERS at a time (each writer starts its next when
    its last is answered), dealt to `instances` in turn; results in order."""

    async def run_all() -> list[Result]:
        writers = asyncio.Semaphore(WRITERS)

        async def one(n: int, query: str, variables: dict[str, Any]) -> Result:
            async with writers:
                return await execute_async(instances[n % len(instances)], query, variables)

        return list(await asyncio.gather(*(one(n, *op) for n, op in enumerate(operations))))

    return asyncio.run(run_all())


def enrolments(svc: Services, students: int) -> list[tuple[str, dict[str, Any]]]:
    create_teacher(svc, "t1")
    create_class(svc, "c1", "t1")
    for n in range(students):
        create_student(svc, id=f"s{n:02d}", name=f"S{n}")
    return [(ENROLL_MIN, {"s": f"s{n:02d}", "c": "c1"}) for n in range(students)]


JOIN_MIN = f"""mutation($s: ID!, $p: ID!) {{
  joinSport(studentId: $s, sportId: $p) {{ sport {{ id }} {USER_ERRORS} }} }}"""


def memberships(svc: Services, students: int) -> list[tuple[str, dict[str, Any]]]:
    create_sport(svc, "p1")
    for n in range(students):
        create_student(svc, id=f"s{n:02d}", name=f"S{n}")
    return [(JOIN_MIN, {"s": f"s{n:02d}", "p": "p1"}) for n in range(students)]


def assert_roster(svc: Services, field: str, id_: str, students: int) -> None:
    """A class's (a sport's) studentCount and its students' totalCount (its roster shards)
    equal what a full read of its roster finds."""
    count = ok(
        svc, f'query {{ {field}(id: "{id_}") {{ studentCount students {{ totalCount }} }} }}'
    )
    listed = roster(svc, field, id_)
    assert count[field]["studentCount"] == count[field]["students"]["totalCount"]
    assert count[field]["studentCount"] == len(listed) == students
    assert_clean(svc)


def assert_enrolled(svc: Services, students: int) -> None:
    assert_roster(svc, "class", "c1", students)


def assert_joined(svc: Services, students: int) -> None:
    assert_roster(svc, "sport", "p1", students)


def creations(students: int, ids: Sequence[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """`students` createStudents in one city (ids s00, s01, ... unless `ids` are given)."""
    chosen = ids if ids is not None else [f"s{n:02d}" for n in range(students)]
    return [
        (
            CREATE_STUDENT_MIN,
            {"i": {"id": id_, "name": f"S{n}", "email": f"{n}@ex.org", "home": HOME}},
        )
        for n, id_ in enumerate(chosen[:students])
    ]


BY_LOCATION = """query($c: String!, $s: String, $t: String, $first: Int, $after: String) {
  studentsByLocation(country: $c, state: $s, city: $t, first: $first, after: $after) {
    totalCount edges { node { id } } pageInfo { hasNextPage endCursor } } }"""


def assert_located(svc: Services, students: int) -> None:
    """Each level's totalCount (its counter) equals what a full read of its pages finds."""
    gql = gql_of(svc)
    for place in (
        {"c": "Canada"},
        {"c": "Canada", "s": "Ontario"},
        {"c": "Canada", "s": "Ontario", "t": "Ottawa"},
    ):
        first = ok(svc, BY_LOCATION, {**place, "first": 1})
        listed = walk(gql, BY_LOCATION, ["studentsByLocation"], first=50, **place)
        assert first["studentsByLocation"]["totalCount"] == len(listed) == students, place
    assert_clean(svc)


# -- sixteen writers of one item ------------------------------------------------------------

PER_WRITER = 10  # writes each writer sends, one after the other


@pytest.fixture(params=[1, WRITERS], ids=["one instance", "an instance a writer"])
def instances(
    request: pytest.FixtureRequest, svc: Services, front: ContentionFront
) -> Iterator[list[Services]]:
    """The API instances the writers are dealt to, all behind the front: one (its writers
    take turns in the process) or one a writer (they meet at DynamoDB, and retry)."""
    made = [svc] + [keep_loop(Services.create(svc.settings)) for _ in range(request.param - 1)]
    try:
        yield made
    finally:
        for other in made[1:]:
            close_services(other)


def test_sixteen_writers_enrolling_into_one_class_all_succeed(
    svc: Services, front: ContentionFront, instances: list[Services]
) -> None:
    operations = enrolments(svc, PER_WRITER * WRITERS)
    for instance in instances:
        front.attach(instance.dynamo)
    all_ok(at_once(instances, operations))
    assert front.counts.transactions >= len(operations)
    if len(instances) == 1:  # its writers took turns: none met another at DynamoDB
        assert front.counts.cancelled == 0
    assert_enrolled(svc, len(operations))


def test_sixteen_writers_joining_one_sport_all_succeed(
    svc: Services, front: ContentionFront, instances: list[Services]
) -> None:
    """A sport counts its members in 8 roster shards as a class does: the same writers meet
    on them, and its count stays exact."""
    operations = memberships(svc, PER_WRITER * WRITERS)
    for instance in instances:
        front.attach(instance.dynamo)
    all_ok(at_once(instances, operations))
    assert front.counts.transactions >= len(operations)
    if len(instances) == 1:
        assert front.counts.cancelled == 0
    assert_joined(svc, len(operations))


def test_sixteen_writers_creating_students_in_one_city_all_succeed(
    svc: Services, front: ContentionFront, instances: list[Services]
) -> None:
    for instance in instances:
        front.attach(instance.dynamo)
    operations = creations(PER_WRITER * WRITERS)
    all_ok(at_once(instances, operations))
    assert front.counts.transactions >= len(operations)
    if len(instances) == 1:
        assert front.counts.cancelled == 0
    assert_located(svc, len(operations))


# -- sixteen writers of one partition past its write budget --------------------------------
#
# Each partition key takes `partition_wcu` write units a second (an item of a transaction
# costs 2); past it, ProvisionedThroughputExceededException, which the API retries on the
# throttles' policy (`retry.REQUEST` and the process's retry budget). The budgets are set so
# that the writers' first waves overrun a partition on any machine, and the queue behind it
# drains in a second or two. Not longer: throttles that last seconds spend one process's
# retry budget (5 a throttle, 500 in all), and its writes then fail UNAVAILABLE (48 creates
# in one city at 2 units a second a shard, one instance: 12-15 of them failed).

# 30 units a second on CLASS#c1, where an enrolment costs 4 (its edge and its roster shard):
# 7.5 enrolments a second, where 16 writers send 8 at once (one a roster shard, in one
# process) or 16 (an instance each): 32-64 units.
CLASS_SCALE = 0.03
# 2 units a second on each counter shard, where a create costs 2 on its country's, its
# state's and its city's shard n (`keys.counter_shard`): the first create on a shard spends
# its second's budget, and the one paired with it, waiting in the process for it to commit,
# finds none left (`paired_on_shards`).
CITY_SCALE = 0.002


def paired_on_shards(pairs: int) -> list[str]:
    """Student ids, two on each of `pairs` counter shards, a pair's two side by side."""
    by_shard: dict[int, list[str]] = {}
    for n in range(1000):
        ids = by_shard.setdefault(zlib.crc32(f"s{n:03d}".encode()) % keys.COUNTER_SHARDS, [])
        ids.append(f"s{n:03d}")
    paired = [ids[:2] for ids in by_shard.values() if len(ids) >= 2][:pairs]
    assert len(paired) == pairs
    return [id_ for pair in paired for id_ in pair]


def test_sixteen_writers_enrolling_into_one_class_past_its_partition_budget_all_succeed(
    svc: Services, front: ContentionFront, instances: list[Services]
) -> None:
    operations = enrolments(svc, WRITERS)
    front.partition_wcu = ContentionFront.scaled(CLASS_SCALE).partition_wcu
    for instance in instances:
        front.attach(instance.dynamo)
    all_ok(at_once(instances, operations))
    assert front.counts.throttled > 0  # the budget was reached, and its refusals retried
    assert front.counts.transactions >= len(operations)
    assert_enrolled(svc, len(operations))  # each counted once, however often it was refused


def test_sixteen_writers_creating_students_in_one_city_past_its_partition_budget_all_succeed(
    svc: Services, front: ContentionFront
) -> None:
    """Sixteen creates at once, two on each of eight counter shards: one instance, whose
    writers of a shard take turns, so that the second of a pair reaches the front just after
    the first on every backend (instances a writer meet conflicts first, and a cancelled
    transaction spends nothing: how far apart their writes land is the machine's pace)."""
    front.partition_wcu = ContentionFront.scaled(CITY_SCALE).partition_wcu
    front.attach(svc.dynamo)
    operations = creations(WRITERS, ids=paired_on_shards(WRITERS // 2))
    all_ok(at_once([svc], operations))
    assert front.counts.throttled > 0
    assert front.counts.transactions >= len(operations)
    assert_located(svc, len(operations))


# -- the front answers as AWS does --------------------------------------------------------


def update_of(table: str, key: dict[str, Any]) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET #n = :v",
        "ExpressionAttributeNames": {"#n": "name"},
        "ExpressionAttributeValues": {":v": {"S": "x"}},
    }


def stock_client(endpoint: str) -> Any:
    """A boto3 client as botocore makes it, parser and modeled exceptions included, with one
    attempt a call: what comes back is the front's answer, not botocore's retries of it."""
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}),
        **LOCAL_CREDENTIALS,
    )


def test_the_front_refuses_with_aws_s_bodies_which_botocore_parses_as_aws_s(
    svc: Services, endpoint: str
) -> None:
    """botocore's own parser (a stock boto3 client) and ours read the front's refusals as
    they read AWS's: the modeled exception, its message, each action's reason."""
    table = svc.settings.table
    held, free = wire_key("STUDENT#s1"), wire_key("STUDENT#s0")
    stock = stock_client(endpoint)
    front = ContentionFront(hold=600.0)  # nothing here waits for it: it is only held
    front.attach(stock)
    front.attach(svc.dynamo)
    # Another instance's transaction has s1's item in flight.
    in_flight = {"TransactItems": [{"Update": update_of(table, held)}]}
    assert front.decide("TransactWriteItems", in_flight, time.monotonic()) is None
    transaction = {
        "TransactItems": [{"Put": {"TableName": table, "Item": free}}, *in_flight["TransactItems"]]
    }
    try:

        def by_stock(operation: str, params: dict[str, Any]) -> Any:
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in operation)
            return getattr(stock, snake.lstrip("_"))(**params)

        def by_ours(operation: str, params: dict[str, Any]) -> Any:
            return awaited(svc.dynamo.call(operation, params, None, missing_table=False))

        for send in (by_stock, by_ours):
            with pytest.raises(ClientError) as cancelled:
                send("TransactWriteItems", transaction)
            answer = cancelled.value.response
            assert answer["Error"] == {
                "Code": "TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for"
                " specific reasons [None, TransactionConflict]",
            }
            assert answer["CancellationReasons"] == [
                {"Code": "None"},
                {"Code": "TransactionConflict", "Message": ONGOING},
            ]
            assert answer["ResponseMetadata"]["HTTPStatusCode"] == 400
            assert retry.failure_of(cancelled.value) is retry.Failure.CONFLICT

            with pytest.raises(ClientError) as conflicted:
                send("PutItem", {"TableName": table, "Item": held})
            assert conflicted.value.response["Error"] == {
                "Code": "TransactionConflictException",
                "Message": ONGOING,
            }
            assert retry.failure_of(conflicted.value) is retry.Failure.CONFLICT

        # The API's own calls, on the loop: the same refusals, not retried at this level.
        with pytest.raises(ClientError) as on_loop:
            run_on(svc, svc.dynamo.call("TransactWriteItems", transaction, None))
        assert on_loop.value.response["CancellationReasons"][1]["Code"] == "TransactionConflict"
        assert front.counts.cancelled == 3 and front.counts.conflicted == 2
        assert scan(svc) == []  # nothing reached the table
    finally:
        front.detach()
        stock.close()


def test_the_front_throttles_a_partition_past_its_budget(svc: Services, endpoint: str) -> None:
    """Per partition key, `partition_wcu` write units a second, a transaction's items
    costing two each; past it AWS's ProvisionedThroughputExceededException."""
    front = ContentionFront.scaled(0.01, hold=HOLD)  # 10 units a second
    put = {"TableName": "t", "Item": wire_key("CLASS#c1")}
    at = 1000.0
    for _ in range(10):
        assert front.decide("PutItem", put, at) is None
    refusal = front.decide("PutItem", put, at)
    assert refusal is not None and refusal.status_code == 400
    other = {"TableName": "t", "Item": wire_key("CLASS#c2")}
    assert front.decide("PutItem", other, at) is None  # each partition has its own budget
    assert front.decide("PutItem", put, at + 0.1) is None  # a tenth of a second: one unit

    def pair(n: int) -> dict[str, Any]:  # two items of c2's partition, in no other write
        items = [wire_key("CLASS#c2", f"E#{n}#{m}") for m in range(2)]
        return {"TransactItems": [{"Put": {"TableName": "t", "Item": i}} for i in items]}

    assert front.decide("TransactWriteItems", pair(1), at + 0.1) is None  # 4 of c2's 10
    assert front.decide("TransactWriteItems", pair(2), at + 0.1) is None  # 4 of 6
    assert front.decide("TransactWriteItems", pair(3), at + 0.1) is not None  # 4 > 2 left
    assert front.counts.throttled == 2

    # On the wire: botocore's modeled exception, and the API's UNAVAILABLE after retries.
    stock = stock_client(endpoint)
    tight = ContentionFront(hold=HOLD, partition_wcu=1.0)  # a transaction's 2 never fit
    tight.attach(stock)
    try:
        with pytest.raises(stock.exceptions.ProvisionedThroughputExceededException) as caught:
            stock.transact_write_items(
                TransactItems=[{"Put": {"TableName": svc.settings.table, "Item": wire_key("X")}}]
            )
        assert caught.value.response["Error"]["Message"].startswith(
            "The level of configured provisioned throughput for the table was exceeded"
        )
    finally:
        tight.detach()
        stock.close()


# -- conflicts are retried until the deadline, free -----------------------------------------


def test_a_write_that_meets_twenty_conflicts_in_a_row_still_lands_and_costs_no_budget(
    svc: Services,
) -> None:
    ((query, variables),) = enrolments(svc, 1)
    faults = Faults(svc.dynamo)
    faults.fail("TransactWriteItems", 20, lambda: cancelled([False, True, False]))
    try:
        result = execute(svc, query, variables)
    finally:
        faults.undo()
    assert result.problems == []
    assert result.context.table.retries.conflicts == 20
    assert result.context.table.retries.count == 0  # the throttles' count is untouched
    assert svc.dynamo.budget.available == svc.dynamo.budget.capacity
    assert len({body["ClientRequestToken"] for body in faults.sent}) == 1
    assert_enrolled(svc, 1)


def test_a_plain_write_of_an_item_a_transaction_holds_waits_for_it(
    svc: Services, front: ContentionFront
) -> None:
    """TransactionConflictException is sent again until the item is free, not returned."""
    table = svc.settings.table
    key = wire_key("LEASE#x")
    front.attach(svc.dynamo)
    # Held by a transaction whose answer never comes back here: the front lets it go after
    # STUCK seconds, as AWS commits or abandons it.
    assert (
        front.decide(
            "TransactWriteItems",
            {"TransactItems": [{"Update": update_of(table, key)}]},
            time.monotonic(),
        )
        is None
    )
    writer = Table(svc.dynamo, table, deadline=time.monotonic() + 60.0)
    run_on(svc, writer.call("PutItem", {"TableName": table, "Item": {**key, "name": {"S": "n"}}}))
    assert front.counts.conflicted >= 1
    assert writer.retries.conflicts == front.counts.conflicted
    assert get_item(svc, "LEASE#x", "A") is not None


# -- the process's writers take turns -----------------------------------------------------


def test_a_transaction_queued_past_its_deadline_is_unavailable_and_writes_nothing(
    svc: Services,
) -> None:
    name = svc.settings.table

    async def queued() -> Unavailable:
        table = Table(svc.dynamo, name, deadline=time.monotonic() + 0.2)
        async with svc.dynamo.item_locks.holding([(name, "K", "A")]):  # another writer's
            with pytest.raises(Unavailable) as stopped:
                await transactions.transact(table, [transactions.put({"PK": "K", "SK": "A"})])
        assert svc.dynamo.item_locks.held() == 0
        return stopped.value

    assert run_on(svc, queued()).message == transactions.QUEUED
    assert get_item(svc, "K", "A") is None


def test_item_locks_take_turns_without_deadlock_and_free_their_entries() -> None:
    async def main() -> None:
        locks = ItemLocks()
        inside: set[str] = set()
        met = []

        async def writer(name: str, keys: list[str]) -> None:
            async with locks.holding(keys):
                met.extend(k for k in keys if k in inside)
                inside.update(keys)
                await asyncio.sleep(0)
                inside.difference_update(keys)

        # Opposite orders, overlapping sets: taken sorted, so none waits in a cycle.
        writers = [writer(f"w{n}", ["x", "y"] if n % 2 else ["y", "x", "z"]) for n in range(50)]
        async with asyncio.timeout(60):
            await asyncio.gather(*writers)
        assert met == []  # never two writers of one key at once
        assert locks.held() == 0

        async with locks.holding(["x"]):
            with pytest.raises(TimeoutError):
                async with locks.holding(["w", "x"], wait=0.05):
                    pass
            assert locks.held() == 1  # the one that gave up left no entry behind
        assert locks.held() == 0

    asyncio.run(main())
