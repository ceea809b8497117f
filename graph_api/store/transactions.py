"""TransactWriteItems: actions as data, conditions that name their failure, safe retries.

Each action carries the error a failed condition means (`NOT_FOUND`, `ALREADY_EXISTS`, ...)
or `STALE`, which means "what we read changed before we wrote: read again". DynamoDB's
`CancellationReasons` come back in action order, so the first failed condition names the
client error. Transaction conflicts are retried (by `Table.call`, under the request's retry
policy) with the same `ClientRequestToken`, so a retry of a transaction that did commit is a
no-op on DynamoDB.

`_apply` is the one door to TransactWriteItems: there a transaction first waits for the
process's other transactions on any of its items (`store/item_locks.py`), so writers of one
hot item (a class's roster count, a city's counters) take turns instead of cancelling each
other at DynamoDB.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.exceptions import ClientError

from graph_api.errors import ApiError, Conflict, Unavailable
from graph_api.model.keys import PK, SK, Key
from graph_api.store import codec
from graph_api.store.codec import Item
from graph_api.store.retry import cancellation_reasons, error_code
from graph_api.store.table import Table

log = logging.getLogger(__name__)

MAX_ACTIONS = 100  # per TransactWriteItems (DynamoDB's limit)

# A condition is a conjunction of clauses: ("exists",), ("not_exists",), ("eq", attr, value),
# ("gt", attr, value), ("owned_by", attr, value), ("zero_or_missing", attr), ("has", path),
# ("lacks", path), ("size_lt", attr, n). An attribute is a name or a document path: a tuple
# of names into nested maps (`("classes", "cls-1", "subject")`).
Clause = tuple[Any, ...]
EXISTS: Clause = ("exists",)
NOT_EXISTS: Clause = ("not_exists",)
Path = str | tuple[str, ...]
# Attribute or path -> value to SET (Mapping's key type is invariant, hence the union).
Assign = Mapping[str, Any] | Mapping[tuple[str, ...], Any] | Mapping[Path, Any]


class Stale(Exception):
    """A condition guarding what we read failed: read again and rebuild the write."""


STALE = Stale()  # a marker for `on_fail`; a fresh `Stale` is raised each time


@dataclass
class _Expression:
    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def name(self, attr: Path) -> str:
        """A placeholder for an attribute, or a dotted one for a document path: map keys
        are ids, never parsed as expression syntax."""
        if isinstance(attr, tuple):
            return ".".join(self.name(part) for part in attr)
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attr
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = codec.encode_value(value)
        return placeholder

    def condition(self, clauses: Sequence[Clause]) -> str:
        parts = []
        for op, *args in clauses:
            if op == "exists":
                parts.append("attribute_exists(PK)")
            elif op == "not_exists":
                parts.append("attribute_not_exists(PK)")
            elif op == "eq":
                parts.append(f"{self.name(args[0])} = {self.value(args[1])}")
            elif op == "gt":
                parts.append(f"{self.name(args[0])} > {self.value(args[1])}")
            elif op == "owned_by":  # absent, or held by this owner
                parts.append(
                    f"(attribute_not_exists(PK) OR {self.name(args[0])} = {self.value(args[1])})"
                )
            elif op == "has":
                parts.append(f"attribute_exists({self.name(args[0])})")
            elif op == "lacks":
                parts.append(f"attribute_not_exists({self.name(args[0])})")
            elif op == "size_lt":
                parts.append(f"size({self.name(args[0])}) < {self.value(args[1])}")
            elif op == "zero_or_missing":
                n = self.name(args[0])
                parts.append(f"(attribute_not_exists({n}) OR {n} = {self.value(0)})")
            else:
                raise ValueError(f"unknown condition {op}")
        return " AND ".join(parts)

    def attach(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.names:
            body["ExpressionAttributeNames"] = self.names
        if self.values:
            body["ExpressionAttributeValues"] = self.values
        return body


@dataclass(frozen=True)
class Action:
    kind: Literal["Put", "Update", "Delete", "ConditionCheck"]
    body: dict[str, Any]  # without TableName
    on_fail: ApiError | Stale | None = None

    def request(self, table: str) -> dict[str, Any]:
        return {self.kind: {"TableName": table, **self.body}}


def put(item: Item, *clauses: Clause, on_fail: ApiError | Stale | None = None) -> Action:
    expr = _Expression()
    body: dict[str, Any] = {"Item": codec.encode(item)}
    if clauses:
        body["ConditionExpression"] = expr.condition(clauses)
    return Action("Put", expr.attach(body), on_fail)


def update(
    key: Key,
    *clauses: Clause,
    assign: Assign | None = None,
    add: Mapping[str, int] | None = None,
    remove: Sequence[Path] = (),
    on_fail: ApiError | Stale | None = None,
) -> Action:
    expr = _Expression()
    sections = []
    if assign:
        sections.append(
            "SET " + ", ".join(f"{expr.name(a)} = {expr.value(v)}" for a, v in assign.items())
        )
    if remove:
        sections.append("REMOVE " + ", ".join(expr.name(a) for a in remove))
    if add:
        sections.append(
            "ADD " + ", ".join(f"{expr.name(a)} {expr.value(v)}" for a, v in add.items())
        )
    body: dict[str, Any] = {
        "Key": codec.encode(key.as_item()),
        "UpdateExpression": " ".join(sections),
    }
    if clauses:
        body["ConditionExpression"] = expr.condition(clauses)
    return Action("Update", expr.attach(body), on_fail)


def delete(key: Key, *clauses: Clause, on_fail: ApiError | Stale | None = None) -> Action:
    expr = _Expression()
    body: dict[str, Any] = {"Key": codec.encode(key.as_item())}
    if clauses:
        body["ConditionExpression"] = expr.condition(clauses)
    return Action("Delete", expr.attach(body), on_fail)


def check(key: Key, *clauses: Clause, on_fail: ApiError | Stale | None = None) -> Action:
    expr = _Expression()
    body = {"Key": codec.encode(key.as_item()), "ConditionExpression": expr.condition(clauses)}
    return Action("ConditionCheck", expr.attach(body), on_fail)


QUEUED = (
    "other writes of the same items kept this one waiting past its deadline; nothing was"
    " written, try again"
)


def _item_of(table: str, action: Action) -> tuple[str, str, str]:
    """The item an action touches (a Put's item holds its own key)."""
    key = action.body.get("Key") or action.body["Item"]
    return (table, key[PK]["S"], key[SK]["S"])


class _Failed(Exception):
    """Conditions failed: the indices of the actions whose conditions did, in order."""

    def __init__(self, indices: list[int]) -> None:
        self.indices = indices
        self.index = indices[0]


async def _apply(table: Table, actions: Sequence[Action], token: str) -> None:
    """One transaction; raises `_Failed` naming a failed condition. Conflicts and throttles
    are sent again, with the same token, by `Table.call`."""
    params = {
        "TransactItems": [a.request(table.name) for a in actions],
        "ClientRequestToken": token,
    }
    remaining = table.remaining()
    items = (_item_of(table.name, action) for action in actions)
    try:
        # Held until DynamoDB has answered, retries included: the next writer of these
        # items is sent only once this transaction's outcome is known.
        async with table.dynamo.item_locks.holding(
            items, None if remaining == float("inf") else max(remaining, 0.0)
        ):
            await table.call("TransactWriteItems", params)
    except TimeoutError:
        raise Unavailable(QUEUED) from None
    except ClientError as error:
        if error_code(error) != "TransactionCanceledException":
            raise
        reasons = cancellation_reasons(error)
        if "ConditionalCheckFailed" not in reasons:
            log.error("transaction cancelled: %s", reasons)
            raise
        failed = [i for i, reason in enumerate(reasons) if reason == "ConditionalCheckFailed"]
        raise _Failed(failed) from None


def new_token() -> str:
    return uuid.uuid4().hex


async def transact(table: Table, actions: Sequence[Action], token: str | None = None) -> None:
    """Apply `actions` atomically, or raise the error of the first failed condition.

    Conflicts with other transactions and throttles are retried with backoff under the same
    token (`Table.call`); when the retry policy stops them, UNAVAILABLE: nothing was written.
    """
    if not actions:
        return
    if len(actions) > MAX_ACTIONS:
        raise ValueError(f"{len(actions)} actions do not fit one transaction")
    try:
        await _apply(table, actions, token or new_token())
    except _Failed as failed:
        failure = actions[failed.index].on_fail
        if failure is None:
            raise Conflict("the write's condition no longer holds") from None
        if isinstance(failure, Stale):
            raise Stale() from None
        raise failure from None


async def transact_each(
    table: Table,
    owner: Key,
    guard: Sequence[Clause],
    actions: Sequence[Action],
    token: str,
    label: str = "",
    release: Sequence[Path] = (),
) -> bool:
    """Apply follow-up actions 99 a transaction while `owner` still satisfies `guard`.

    Each transaction checks the guard first: False when it fails (the caller finds out why).
    An action whose own condition fails is dropped and the rest of its chunk sent again:
    follow-up copies are conditioned on their target still being there, and one that left
    meanwhile needs no copy. `label` tells apart the tokens of one write's calls. `release`:
    attributes of `owner` (a claim) that the last transaction removes, so a write's end
    commits with its last copies; with no actions, that transaction is sent alone.
    """
    step = MAX_ACTIONS - 1
    chunks = [list(actions[start : start + step]) for start in range(0, len(actions), step)]
    for n, chunk in enumerate(chunks or [[]]):
        last = n == max(len(chunks) - 1, 0)
        lead = update(owner, *guard, remove=release) if last and release else check(owner, *guard)
        retry = 0
        while chunk or lead.kind == "Update":
            # Each transaction (a chunk, or a chunk sent again) needs a token of its own.
            chunk_token = f"{token[:16]}-{label[:6]}-{n}-{retry}"
            try:
                await _apply(table, [lead, *chunk], chunk_token)
                # A step of a long write committed: the next gets the policy's retries
                # afresh, so contention spread over many chunks cannot starve a write that
                # keeps making progress (its attempts stay bounded: chunks x the policy).
                table.retries.progressed()
                break
            except _Failed as failed:
                if failed.index == 0:
                    return False
                gone = {i - 1 for i in failed.indices}
                chunk = [action for i, action in enumerate(chunk) if i not in gone]
                retry += 1
    return True
