"""`make bench`'s tables, from its result (the JSON it writes to test-output/).

A result names its sides by label: "head" (this checkout over TLS), "base" when `BASE=` was
given, "PostGraphile" when the peer ran, and "head, plain HTTP" with `--plain`. Each query
row holds, per side, `median_ms`, `p95_ms` and `cpu_ms_per_request` (API sides also
`dynamodb_requests`); `throughput` holds Q1 at N clients per side (`rps`, `median_ms`,
`errors`, `cpu_ms_per_request`).
"""

from __future__ import annotations

from typing import Any

HEAD, BASE, PEER = "head", "base", "PostGraphile"
# The bar of a speed change, head against the base: five queries' API CPU summed, the worst query,
# Q1's requests/s at 16 clients.
SUMMED_AT_MOST, QUERY_AT_MOST, THROUGHPUT_AT_LEAST = 0.85, 1.05, 1.15


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs, None when either is missing or theirs is 0."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}\u00d7"


def ms(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def _sides(result: dict[str, Any]) -> list[str]:
    return [side["label"] for side in result["sides"]]


def _apis(result: dict[str, Any]) -> list[str]:
    return [side["label"] for side in result["sides"] if side["kind"] == "api"]


FIVE = ("Q1", "Q2", "Q3", "Q4", "Q5")  # the queries the bars sum (not Q6, added later)


def summed(result: dict[str, Any], label: str) -> float | None:
    """A side's CPU ms per request, summed over the five queries (None if one is missing)."""
    values = [
        q["sides"].get(label, {}).get("cpu_ms_per_request")
        for q in result["queries"]
        if q["name"] in FIVE
    ]
    return None if not values or None in values else sum(values)


def query_table(result: dict[str, Any]) -> list[str]:
    """Per query: each side's p50, each API's DynamoDB requests."""
    sides, apis = _sides(result), _apis(result)
    head = ["query", *(f"{s} p50 ms" for s in sides), *(f"{a} DynamoDB requests" for a in apis)]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for q in result["queries"]:
        cells = [f"{q['name']} {q['title']}"]
        cells += [ms(q["sides"].get(s, {}).get("median_ms")) for s in sides]
        cells += [count(q["sides"].get(a, {}).get("dynamodb_requests")) for a in apis]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_table(result: dict[str, Any]) -> list[str]:
    """Per query: CPU ms per request of each side, head/base and each API over PostGraphile's
    Node; then the five summed (ratios of the sums)."""
    sides, apis = _sides(result), _apis(result)
    with_base, with_peer = BASE in sides, PEER in sides
    head = ["query", *(f"{s} CPU ms/request" for s in sides)]
    if with_base:
        head.append("head/base")
    if with_peer:
        head += [f"{a}/Node" for a in apis]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    rows = [
        (q["name"], {s: q["sides"].get(s, {}).get("cpu_ms_per_request") for s in sides})
        for q in result["queries"]
    ]
    rows.append(("five summed", {s: summed(result, s) for s in sides}))
    for name, cpu in rows:
        cells = [name, *(ms(cpu[s]) for s in sides)]
        if with_base:
            cells.append(times(ratio(cpu[HEAD], cpu[BASE])))
        if with_peer:
            cells += [times(ratio(cpu[a], cpu[PEER])) for a in apis]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def throughput_table(result: dict[str, Any]) -> list[str]:
    """Q1 at N clients: each side's requests/s and CPU ms per request (all its workers), then
    head over base and over PostGraphile."""
    tp = result["throughput"]
    lines = [
        f"| Q1 \u00d7{tp['clients']} | requests/s | p50 ms | errors | CPU ms/request |",
        "|---|---:|---:|---:|---:|",
    ]
    sides = tp["sides"]
    for label, side in sides.items():
        lines.append(
            f"| {label} | {side['rps']:.1f} | {ms(side['median_ms'], 1)} | {side['errors']} "
            f"| {ms(side['cpu_ms_per_request'])} |"
        )
    for other in (BASE, PEER):
        if HEAD in sides and other in sides:
            ours, theirs = sides[HEAD], sides[other]
            lines.append(
                f"| head/{other} | {times(ratio(ours['rps'], theirs['rps']))} "
                f"| {times(ratio(ours['median_ms'], theirs['median_ms']))} | "
                f"| {times(ratio(ours['cpu_ms_per_request'], theirs['cpu_ms_per_request']))} |"
            )
    return lines


def against_base(result: dict[str, Any]) -> list[str]:
    """The bar of a speed change for head against the base, one line each: met or not."""
    if BASE not in _sides(result):
        return []
    out = []
    total = ratio(summed(result, HEAD), summed(result, BASE))
    out.append(
        _bar(
            f"five queries' API CPU summed, head/base {times(total)}",
            total is not None and total <= SUMMED_AT_MOST,
            f"at most {SUMMED_AT_MOST}\u00d7",
        )
    )
    worst = max(
        (
            (r, q["name"])
            for q in result["queries"]
            if (
                r := ratio(  # None for a query the base was not asked (Q6)
                    q["sides"].get(HEAD, {}).get("cpu_ms_per_request"),
                    q["sides"].get(BASE, {}).get("cpu_ms_per_request"),
                )
            )
            is not None
        ),
        default=None,
    )
    if worst is not None:
        out.append(
            _bar(
                f"the worst query, {worst[1]} {times(worst[0])}",
                worst[0] <= QUERY_AT_MOST,
                f"at most {QUERY_AT_MOST}\u00d7",
            )
        )
    unequal = [
        f"{q['name']} {count(q['sides'][HEAD].get('dynamodb_requests'))} vs "
        f"{count(q['sides'][BASE].get('dynamodb_requests'))}"
        for q in result["queries"]
        if BASE in q["sides"]  # not a query the base was not asked (Q6)
        and q["sides"][HEAD].get("dynamodb_requests") != q["sides"][BASE].get("dynamodb_requests")
    ]
    out.append(
        _bar(
            "DynamoDB requests per query equal" + (f": {', '.join(unequal)}" if unequal else ""),
            not unequal,
            "unchanged",
        )
    )
    sides = (result.get("throughput") or {}).get("sides", {})
    if HEAD in sides and BASE in sides:
        rps = ratio(sides[HEAD]["rps"], sides[BASE]["rps"])
        out.append(
            _bar(
                f"Q1 \u00d7{result['throughput']['clients']} requests/s, head/base {times(rps)}",
                rps is not None and rps >= THROUGHPUT_AT_LEAST,
                f"at least {THROUGHPUT_AT_LEAST}\u00d7",
            )
        )
    return out


def _bar(what: str, met: bool, wanted: str) -> str:
    return f"- {'met' if met else 'NOT met'}: {what} (bar: {wanted})"


def render(result: dict[str, Any]) -> str:
    env, params = result["env"], result["params"]
    described = "; ".join(f"{s['label']}: {s['what']}" for s in result["sides"])
    lines = [
        f"### make bench, {result['started_utc']}",
        "",
        f"{described}. Same dataset (seed 11: {result['dataset']}), seeded through head's "
        "mutations by a server of its own, which serves on untimed holding the change stream's "
        f"lease. {params['warmup']} warm-up + {params['requests']} timed requests per query "
        f"and side"
        + (
            f" (PostGraphile {params['peer_warmup']} more warm-up first)"
            if params.get("peer_warmup")
            else ""
        )
        + (
            f", each API request signed as a {params['role']} (HS256 tokens checked)"
            if params.get("role")
            else ""
        )
        + ", one keep-alive connection each from a client process of their own, the sides "
        f"taking turns in blocks of {params['block']}. CPU: user + system time of each server's "
        "process tree (PostGraphile: its Node process; PostgreSQL and DynamoDB Local not counted) "
        f"from /proc over the timed requests, per request. {env['cpus']} CPUs, "
        f"Python {env['python']}.",
        "",
        *query_table(result),
        "",
        *cpu_table(result),
    ]
    if result.get("throughput"):
        tp = result["throughput"]
        lines += [
            "",
            f"Q1 from {tp['clients']} concurrent keep-alive clients: {tp['seconds']:g} s a side "
            f"in {tp['rounds']} turns after a {tp['warmup_seconds']:g} s warm-up; each API "
            f"served by `graph-api serve` with its default workers ({tp['workers']}); CPU of "
            "all the server's processes per answered request.",
            "",
            *throughput_table(result),
        ]
    bar = against_base(result)
    if bar:
        lines += ["", *bar]
    return "\n".join(lines)
