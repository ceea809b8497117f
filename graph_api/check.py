"""`graph-api check`: read the whole table and report every broken invariant of the graph.

The one place a Scan is right: an offline tool, paged, with progress. Each finding names
its kind, the item and what is wrong; none means the materialized graph is whole.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from time import sleep
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from graph_api import items, keys
from graph_api.errors import BadUserInput, Unavailable
from graph_api.items import EDGE_TYPES, TEACHING, EdgeType
from graph_api.keys import GSI1PK, GSI1SK, PK, SK, Kind
from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.codec import Item
from graph_api.store.retry import backoff

NODE_TYPES = {kind.lower(): kind for kind in Kind}
KEY_ATTRS = (PK, SK, GSI1PK, GSI1SK)

# A Scan page that times out or is throttled is sent again, at most SCAN_ATTEMPTS times in all,
# after a capped exponential backoff with full jitter (an offline tool can wait longer than
# a request); each retry asks for half the items of the last try, RETRY_PAGE first when the
# page had no Limit (DynamoDB's 1 MB), SMALLEST_PAGE at least.
SCAN_ATTEMPTS = 8
SCAN_BACKOFF = 0.25  # seconds, doubled per attempt
SCAN_BACKOFF_CAP = 4.0
RETRY_PAGE = 1000
SMALLEST_PAGE = 10


@dataclass(frozen=True)
class Finding:
    kind: str  # orphan-edge, bad-key, stale-copy, count, email-guard, unknown-item, ...
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind:<13} {self.key}: {self.message}"


class ScanGaveUp(Exception):
    """A Scan page failed for good: how far the scan got. The page's last error is the cause."""

    def __init__(self, scanned: int, pages: int, attempts: int) -> None:
        super().__init__(
            f"scan gave up after {scanned} items scanned in {pages} pages:"
            f" the next page failed {attempts} time(s)"
        )
        self.scanned = scanned
        self.pages = pages
        self.attempts = attempts


def _retryable(error: Exception) -> bool:
    """A timeout, a dropped connection or a throttle; not an endpoint nobody listens on."""
    return isinstance(error, Unavailable) and not isinstance(
        error.__cause__, EndpointConnectionError
    )


def _scan_page(dynamo: Dynamo, params: dict[str, Any], scanned: int, pages: int) -> Any:
    """One Scan page, sent again (from the same ExclusiveStartKey, smaller) while it fails."""
    for attempt in range(1, SCAN_ATTEMPTS + 1):
        try:
            return dynamo.call_sync("Scan", params, None)
        except (Unavailable, ClientError, BotoCoreError) as error:
            if attempt == SCAN_ATTEMPTS or not _retryable(error):
                raise ScanGaveUp(scanned, pages, attempt) from error
        limit = params.get("Limit")
        params["Limit"] = RETRY_PAGE if limit is None else max(SMALLEST_PAGE, limit // 2)
        sleep(backoff(attempt, SCAN_BACKOFF, SCAN_BACKOFF_CAP))
    raise AssertionError("unreachable")


def scan(
    dynamo: Dynamo,
    table: str,
    progress: Callable[[int], None] | None = None,
    *,
    page_size: int | None = None,
) -> Iterator[Item]:
    """Every item of the table, page by page (`page_size` items a page, or DynamoDB's 1 MB).

    A page that times out is retried and the scan pages on; ScanGaveUp when it cannot.
    """
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    if page_size is not None:
        params["Limit"] = page_size
    seen = pages = 0
    while True:
        page = _scan_page(dynamo, params, seen, pages)
        for wire in page.get("Items", []):
            yield codec.decode(wire)
        seen += page.get("Count", 0)
        pages += 1
        if progress:
            progress(seen)
        if "LastEvaluatedKey" not in page:
            return
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _where(item: Item) -> str:
    return f"{item.get(PK)} / {item.get(SK)}"


def _keys_differ(actual: Item, expected: Item) -> list[str]:
    return [a for a in KEY_ATTRS if actual.get(a) != expected.get(a)]


class _Checker:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.nodes: dict[tuple[str, str], Item] = {}
        self.homes: list[Item] = []
        self.guards: list[Item] = []
        self.edges: dict[str, list[Item]] = defaultdict(list)

    def report(self, kind: str, item: Item, message: str) -> None:
        self.findings.append(Finding(kind, _where(item), message))

    def add(self, item: Item) -> None:
        kind = item.get(items.TYPE)
        if kind in NODE_TYPES:
            self.nodes[(kind, item.get("id", ""))] = item
        elif kind == "home":
            self.homes.append(item)
        elif kind == "email":
            self.guards.append(item)
        elif kind in {et.name for et in EDGE_TYPES}:
            self.edges[kind].append(item)
        else:
            self.report("unknown-item", item, f"item of unknown type {kind!r}")

    def node(self, kind: Kind, id_: str) -> Item | None:
        return self.nodes.get((kind.lower(), id_))

    def run(self) -> list[Finding]:
        self.check_nodes()
        self.check_homes()
        for edge_type in EDGE_TYPES:
            self.check_edges(edge_type)
        self.check_counts()
        self.check_guards()
        return self.findings

    def checked(self, item: Item, check: Callable[[Item], None]) -> None:
        """Run one item's check; an item too damaged to rebuild is a finding too."""
        try:
            check(item)
        except (KeyError, TypeError, BadUserInput) as error:
            self.report("malformed", item, f"cannot be checked: {error!r}")

    def check_nodes(self) -> None:
        for node in self.nodes.values():
            self.checked(node, self.check_node)

    def check_node(self, node: Item) -> None:
        kind = NODE_TYPES[node[items.TYPE]]
        if bad := _keys_differ(node, items.node_item(kind, node["id"])):
            self.report("bad-key", node, f"{', '.join(bad)} disagree with the node's id")
        if kind is Kind.CLASS:
            teacher = self.node(Kind.TEACHER, node["teacherId"])
            if teacher is None:
                self.report("orphan-class", node, f"teacher {node['teacherId']} does not exist")
            elif node.get("teacherName") != teacher["name"]:
                self.report("stale-copy", node, f"teacherName is not {teacher['name']!r}")

    def check_homes(self) -> None:
        for home in self.homes:
            self.checked(home, self.check_home)

    def check_home(self, home: Item) -> None:
        student = self.node(Kind.STUDENT, home["studentId"])
        if student is None:
            self.report("orphan-home", home, f"student {home['studentId']} does not exist")
            return
        expected = items.home(student, home["country"], home["state"], home["city"], None)
        if bad := _keys_differ(home, expected):
            self.report("bad-key", home, f"{', '.join(bad)} disagree with the home's place")
        if home.get("studentName") != student["name"]:
            self.report("stale-copy", home, f"studentName is not {student['name']!r}")

    def check_edges(self, edge_type: EdgeType) -> None:
        for edge in self.edges[edge_type.name]:
            self.checked(edge, lambda item: self.check_edge(edge_type, item))

    def check_edge(self, edge_type: EdgeType, edge: Item) -> None:
        ends = [(kind, edge[f"{kind.lower()}Id"]) for kind in (edge_type.owner, edge_type.target)]
        owner, target = (self.node(kind, id_) for kind, id_ in ends)
        if owner is None or target is None:
            missing = [f"{k.lower()} {i}" for (k, i) in ends if self.node(k, i) is None]
            self.report("orphan-edge", edge, f"{' and '.join(missing)} missing")
            return
        expected = edge_type.item(owner, target)
        if bad := _keys_differ(edge, expected):
            self.report("bad-key", edge, f"{', '.join(bad)} disagree with its endpoints")
        copied = (*edge_type.owner_copies, *edge_type.target_copies)
        if stale := [a for a in copied if edge.get(a) != expected[a]]:
            self.report("stale-copy", edge, f"{', '.join(stale)} differ from the nodes")

    def check_counts(self) -> None:
        counted: dict[tuple[str, str, str], int] = Counter()
        for edge_type in EDGE_TYPES:
            for edge in self.edges[edge_type.name]:
                owner = (edge_type.owner.lower(), edge.get(f"{edge_type.owner.lower()}Id", ""))
                counted[(*owner, edge_type.owner_count)] += 1
                if edge_type.target_count:
                    target = (
                        edge_type.target.lower(),
                        edge.get(f"{edge_type.target.lower()}Id", ""),
                    )
                    counted[(*target, edge_type.target_count)] += 1
        counters = {(et.owner.lower(), et.owner_count) for et in EDGE_TYPES}
        counters |= {(et.target.lower(), et.target_count) for et in EDGE_TYPES if et.target_count}
        for (type_name, id_), node in self.nodes.items():
            for counter_type, counter in counters:
                if counter_type != type_name:
                    continue
                edges = counted.get((type_name, id_, counter), 0)
                if node.get(counter, 0) != edges:
                    self.report(
                        "count", node, f"{counter} is {node.get(counter)}, edges say {edges}"
                    )
        teaching = {e.get("classId"): e.get("teacherId") for e in self.edges[TEACHING.name]}
        for (type_name, id_), node in self.nodes.items():
            if type_name == "class" and teaching.get(id_) != node.get("teacherId"):
                self.report(
                    "teaching", node, f"no teaching edge from teacher {node.get('teacherId')}"
                )

    def check_guards(self) -> None:
        guarded: dict[str, Item] = {}
        for guard in self.guards:
            student = self.node(Kind.STUDENT, guard.get("studentId", ""))
            if student is None:
                self.report(
                    "email-guard",
                    guard,
                    f"guards for student {guard.get('studentId')}, who does not exist",
                )
            elif keys.email_guard(student["email"]).pk != guard[PK]:
                self.report(
                    "email-guard", guard, f"student {student['id']}'s email is {student['email']!r}"
                )
            else:
                guarded[student["id"]] = guard
        for (type_name, id_), node in self.nodes.items():
            if type_name == "student" and id_ not in guarded:
                self.report("email-guard", node, f"email {node.get('email')!r} has no guard item")


def check_table(
    dynamo: Dynamo,
    table: str,
    progress: Callable[[int], None] | None = None,
    *,
    page_size: int | None = None,
) -> list[Finding]:
    checker = _Checker()
    for item in scan(dynamo, table, progress, page_size=page_size):
        checker.add(item)
    return checker.run()
