"""What every phase of one bench run shares (bench/plain.py and bench/production.py make it): the
command line, the peer's modules and dataset, and the peer when it runs."""

from __future__ import annotations

import argparse
import dataclasses
from types import ModuleType
from typing import Any

from bench import peer
from bench import queries as peer_queries


@dataclasses.dataclass(frozen=True)
class BenchRun:
    args: argparse.Namespace
    mods: dict[str, ModuleType]  # the peer's modules (bench/peer.py)
    data: dict[str, Any]  # its seed-11 school
    targets: dict[str, Any]  # what its queries ask for
    school: peer_queries.School  # `data` indexed, to check our answers
    running: peer.Running | None  # the peer serving, or None: our side only

    @property
    def httpbench(self) -> ModuleType:
        """The peer's keep-alive client and its figures (`summarize_ms`, `throughput_run`)."""
        return self.mods["httpbench"]

    def queries(self) -> list[BenchQuery]:
        """The queries: ours, the peer's when it runs, and the bodies each side is sent."""
        encode = self.httpbench.encode
        peer = self.mods["queries"]
        theirs = (
            {
                spec.name: spec
                for spec in [*peer.build(self.targets), *peer_queries.peer_specs(peer, self.data)]
            }
            if self.running is not None
            else {}
        )
        out = []
        for ours in peer_queries.build(self.data, self.targets):
            peer_spec = theirs.get(ours.name)
            out.append(
                BenchQuery(
                    ours,
                    encode(ours.query, ours.variables),
                    peer_spec,
                    encode(peer_spec.query, peer_spec.variables) if peer_spec else None,
                )
            )
        return out


@dataclasses.dataclass(frozen=True)
class BenchQuery:
    """One query on both sides: our document and its check (`peer_queries.Ours`), the peer's
    (its `queries.py` spec, None when it does not run), and the body each side is sent."""

    ours: peer_queries.Ours
    body: bytes
    theirs: Any | None
    theirs_body: bytes | None

    @property
    def name(self) -> str:
        return self.ours.name
