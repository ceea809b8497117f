"""The in-process replay behind `make profile` runs the bench's five queries cleanly."""

from __future__ import annotations

import asyncio

from bench import replay


def test_replay_answers_the_five_queries_without_errors() -> None:
    harness = replay.Harness(students=60)

    async def run_all() -> list[int]:
        return [
            replay.count_fields(await harness.run(query))
            for query in replay.replays(harness.targets)
        ]

    fields = asyncio.run(run_all())
    assert len(fields) == 5 and all(count > 10 for count in fields)
