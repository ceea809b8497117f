"""One stream reader per table: a lease item, and the reader's checkpoints on it.

Every instance runs a `StreamReader`; the one holding the lease item
(`keys.stream_lease()`) reads the stream, the others try to take the lease every renew
interval. The item:

    PK = LEASE#stream  SK = LEASE  type = lease
    token        the holder's random token for this holding (absent: released)
    owner        who holds or last held it (host and pid), for people reading the table
    expires      epoch milliseconds after which anyone may take it
    streamArn    the stream the checkpoints belong to
    checkpoints  {shard id: last published sequence number, or a sentinel below}

Taking is a conditional write (absent, released, expired, or already ours); renewing,
checkpointing and releasing are conditioned on our token, so a reader whose lease was taken
can never move a checkpoint: its write fails, and it stops reading (`LeaseLost`). Expiry is
judged on wall clocks (the holder stops on its own monotonic clock at the same instant), so
instances' clocks must agree to well within the lease duration, as NTP keeps them.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from graph_api.errors import Unavailable
from graph_api.model import keys
from graph_api.model.items import LEASE_TYPE, TYPE
from graph_api.store import codec
from graph_api.store.client import Dynamo
from graph_api.store.table import Table

log = logging.getLogger(__name__)

# Checkpoint values that are not sequence numbers.
LATEST = "LATEST"  # open when the reader first started: begin at what is written next
TRIM_HORIZON = "TRIM_HORIZON"  # a child of a finished shard: read it from its start
SHARD_END = "SHARD_END"  # read to its end; dropped once its children are in the map


class LeaseLost(Exception):
    """Another instance holds the lease now, or ours ran out before we could renew it."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _conditional_failure(error: ClientError) -> bool:
    return bool(error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


class Lease:
    """This instance's side of the lease item (see the module's docstring)."""

    def __init__(
        self,
        dynamo: Dynamo,
        table: str,
        duration: float,
        *,
        owner: str | None = None,
        requests: Counter[str] | None = None,
    ) -> None:
        self._dynamo = dynamo
        self._table_name = table
        self.duration = duration
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.requests: Counter[str] = Counter() if requests is None else requests
        self.token: str | None = None
        self._valid_until = 0.0  # monotonic: past it we may no longer hold the lease
        self.stream_arn: str | None = None
        self.checkpoints: dict[str, str] = {}

    @property
    def renew_interval(self) -> float:
        return self.duration / 3

    def held(self) -> bool:
        """Whether we hold the lease, on our own clock: taken or renewed less than its
        duration ago (measured from before the write, so never later than others see it)."""
        return self.token is not None and time.monotonic() < self._valid_until

    async def _update(
        self,
        purpose: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        *,
        returns: bool = False,
    ) -> dict[str, Any] | None:
        params: dict[str, Any] = {
            "TableName": self._table_name,
            "Key": codec.encode(keys.stream_lease().as_item()),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {k: codec.encode_value(v) for k, v in values.items()},
        }
        if returns:
            params["ReturnValues"] = "ALL_NEW"
        self.requests[f"UpdateItem:{purpose}"] += 1
        # Each lease write is a request of its own for the retry policy (a table handle
        # per write: its own count of retries), with no deadline: `held()` says when the
        # lease ran out.
        response = await Table(self._dynamo, self._table_name).call("UpdateItem", params)
        attributes = response.get("Attributes")
        return codec.decode(attributes) if attributes else None

    async def take(self) -> bool:
        """Take the lease if it is free, released, expired or ours already; False if another
        instance holds it. Our checkpoints come with it."""
        token = uuid.uuid4().hex
        started = time.monotonic()
        now = _now_ms()
        names = {"#type": TYPE, "#owner": "owner", "#token": "token", "#expires": "expires"}
        names["#checkpoints"] = "checkpoints"
        values: dict[str, Any] = {
            ":type": LEASE_TYPE,
            ":owner": self.owner,
            ":token": token,
            ":expires": now + int(self.duration * 1000),
            ":now": now,
            ":empty": {},
        }
        # `#token = :token`: a retry of this very write, whose first answer was lost.
        condition = "attribute_not_exists(#token) OR #expires < :now OR #token = :token"
        if self.token is not None:  # ours still, or a take cut short: take it again
            condition += " OR #token = :mine"
            values[":mine"] = self.token
        # Known before the write: if it is cut short (cancelled, no answer) but was made,
        # `release` and the next `take` still name it. Not held until it is answered.
        self.token, self._valid_until = token, 0.0
        try:
            item = await self._update(
                "take",
                "SET #type = :type, #owner = :owner, #token = :token, #expires = :expires,"
                " #checkpoints = if_not_exists(#checkpoints, :empty)",
                condition,
                names,
                values,
                returns=True,
            )
        except ClientError as error:
            if _conditional_failure(error):
                self._drop()
                return False
            raise
        assert item is not None
        self._valid_until = started + self.duration
        self.stream_arn = item.get("streamArn")
        self.checkpoints = {str(k): str(v) for k, v in (item.get("checkpoints") or {}).items()}
        return True

    async def _ours(
        self, purpose: str, update: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        """A write to the lease item on condition that we still hold it, else `LeaseLost`."""
        if self.token is None:
            raise LeaseLost("the lease is not ours")
        try:
            await self._update(
                purpose,
                update,
                "#token = :mine",
                {**names, "#token": "token"},
                {**values, ":mine": self.token},
            )
        except ClientError as error:
            if _conditional_failure(error):
                self._drop()
                raise LeaseLost("another instance took the stream's lease") from None
            raise

    async def renew(self) -> None:
        started = time.monotonic()
        expires = _now_ms() + int(self.duration * 1000)
        await self._ours(
            "renew", "SET #expires = :expires", {"#expires": "expires"}, {":expires": expires}
        )
        self._valid_until = started + self.duration

    async def release(self) -> None:
        """Give the lease up so that another instance takes it at once (its next try).
        Nothing to do if it is not ours; a failure is logged, and the lease then expires."""
        if self.token is None:
            return
        try:
            await self._ours(
                "release",
                "REMOVE #token SET #expires = :zero",
                {"#expires": "expires"},
                {":zero": 0},
            )
        except LeaseLost:
            pass
        except (Unavailable, ClientError) as error:
            log.warning("could not release the stream's lease (it expires by itself): %s", error)
        self._drop()

    def _drop(self) -> None:
        self.token, self._valid_until = None, 0.0

    async def begin_stream(self, arn: str, checkpoints: dict[str, str]) -> None:
        """Checkpoints for a stream the lease has not read before (a first start, or the
        stream was turned off and on): they replace those of any earlier stream."""
        await self._ours(
            "begin",
            "SET #stream = :arn, #checkpoints = :checkpoints",
            {"#stream": "streamArn", "#checkpoints": "checkpoints"},
            {":arn": arn, ":checkpoints": checkpoints},
        )
        self.stream_arn, self.checkpoints = arn, dict(checkpoints)

    async def checkpoint(self, shard: str, sequence: str) -> None:
        """Everything of `shard` up to `sequence` has been published."""
        await self._ours(
            "checkpoint",
            "SET #checkpoints.#shard = :sequence",
            {"#checkpoints": "checkpoints", "#shard": shard},
            {":sequence": sequence},
        )
        self.checkpoints[shard] = sequence

    async def finish_shard(self, shard: str, children: Sequence[str], gone: Iterable[str]) -> None:
        """`shard` is closed and read to its end: its children take its place in the map,
        read from their start (or, none listed yet, it stays as SHARD_END until they are).
        Entries of shards the stream no longer lists (`gone`) are dropped in the same write,
        so the map stays as small as the stream."""
        names = {"#checkpoints": "checkpoints"}
        values: dict[str, Any] = {}
        removes = sorted(set(gone) - {shard, *children})
        sets: list[str] = []
        if children:
            removes.append(shard)
            values[":start"] = TRIM_HORIZON
            for i, child in enumerate(children):
                names[f"#c{i}"] = child
                sets.append(f"#checkpoints.#c{i} = if_not_exists(#checkpoints.#c{i}, :start)")
        else:
            names["#shard"] = shard
            values[":end"] = SHARD_END
            sets.append("#checkpoints.#shard = :end")
        for i, name in enumerate(removes):
            names[f"#r{i}"] = name
        update = "SET " + ", ".join(sets)
        if removes:
            update += " REMOVE " + ", ".join(f"#checkpoints.#r{i}" for i in range(len(removes)))
        await self._ours("finish", update, names, values)
        for name in removes:
            self.checkpoints.pop(name, None)
        if children:
            for child in children:
                self.checkpoints.setdefault(child, TRIM_HORIZON)
        else:
            self.checkpoints[shard] = SHARD_END
