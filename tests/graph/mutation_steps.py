"""The mutation tests' own steps and reads: leaving a sport, a catalog's ids, students by
location, the ids of nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from support import Result, edge_mutation, ok

if TYPE_CHECKING:
    from graph_api.graph.engine.context import Services


def ids_of(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["id"] for n in nodes]


def leave(services: Services, student_id: str, sport_id: str) -> Result:
    return edge_mutation(services, "leaveSport", "sportId", student_id, sport_id)


def catalog(services: Services, field: str) -> list[str]:
    data = ok(services, f"{{ {field}(first: 100) {{ edges {{ node {{ id }} }} }} }}")
    return [e["node"]["id"] for e in data[field]["edges"]]


def by_location(
    services: Services, country: str, state: str | None = None, city: str | None = None
) -> list[dict[str, Any]]:
    data = ok(
        services,
        """query($c: String!, $s: String, $t: String) {
          studentsByLocation(country: $c, state: $s, city: $t, first: 100) {
            edges { node { id name } } } }""",
        {"c": country, "s": state, "t": city},
    )
    return [e["node"] for e in data["studentsByLocation"]["edges"]]
