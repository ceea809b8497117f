"""What every phase of one `make bench` run shares (tools/peer_bench.py makes it): the
command line, the peer's modules and dataset, and the peer when it runs."""

from __future__ import annotations

import argparse
import dataclasses
from types import ModuleType
from typing import Any

from tools import peer, peer_queries


@dataclasses.dataclass(frozen=True)
class BenchRun:
    args: argparse.Namespace
    mods: dict[str, ModuleType]  # the peer's modules (tools/peer.py)
    data: dict[str, Any]  # its seed-11 school
    targets: dict[str, Any]  # what its queries ask for
    school: peer_queries.School  # `data` indexed, to check our answers
    running: peer.Running | None  # the peer serving, or None: our side only

    @property
    def httpbench(self) -> ModuleType:
        """The peer's keep-alive client and its figures (`summarize_ms`, `throughput_run`)."""
        return self.mods["httpbench"]

    def ours(self) -> list[peer_queries.Ours]:
        """Our five queries."""
        return peer_queries.build(self.data, self.targets)

    def theirs(self) -> dict[str, Any]:
        """The peer's five queries by name; none when it does not run."""
        if self.running is None:
            return {}
        return {spec.name: spec for spec in self.mods["queries"].build(self.targets)}
