"""`make bench`'s figures: the CPU a server's processes used (/proc) and the tables that compare
head with the base and with PostGraphile."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from bench import proc, report


def test_stat_is_read_past_a_command_name_with_spaces_and_parentheses() -> None:
    raw = "4242 (graph-api (w) 1) S 17 4242 4242 0 -1 4194560 9 0 0 0 120 35 4 2 20 0 3 0 99\n"
    assert proc.parse_stat(raw) == proc.Stat(ppid=17, ticks=155)


def test_descendants_are_children_and_their_children_only() -> None:
    parents = {10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 21: 20}
    assert sorted(proc.descendants(10, parents)) == [11, 12, 13]
    assert proc.descendants(13, parents) == []


def test_a_child_process_cpu_counts_in_its_parents_tree() -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin + "input()"], stdin=subprocess.PIPE)
    try:
        while proc.cpu_seconds([child.pid]) < 0.25:  # its busy loop, then it waits for input
            pass
        assert child.pid in proc.descendants(os.getpid())
        assert proc.tree_cpu_seconds(os.getpid()) >= proc.cpu_seconds([os.getpid()]) + 0.25
    finally:
        child.communicate(b"\n")
    assert proc.cpu_seconds([child.pid]) == 0  # gone: counts nothing


def _result(head: list[float], base: list[float], requests: tuple[int, int] = (3, 3)) -> Any:
    sides = [("head", "api"), ("base", "api"), ("PostGraphile", "peer")]
    return {
        "sides": [{"label": label, "kind": kind, "what": label} for label, kind in sides],
        "queries": [
            {
                "name": f"Q{i + 1}",
                "title": "",
                "sides": {
                    "head": {"cpu_ms_per_request": h, "median_ms": 5, "dynamodb_requests": 3},
                    "base": {
                        "cpu_ms_per_request": b,
                        "median_ms": 6,
                        "dynamodb_requests": requests[i % 2],
                    },
                    "PostGraphile": {"cpu_ms_per_request": 1.0, "median_ms": 2},
                },
            }
            for i, (h, b) in enumerate(zip(head, base, strict=True))
        ],
        "throughput": {
            "clients": 16,
            "sides": {
                "head": {"rps": 240, "median_ms": 60, "errors": 0, "cpu_ms_per_request": 6},
                "base": {"rps": 200, "median_ms": 70, "errors": 0, "cpu_ms_per_request": 8},
            },
        },
    }


def test_the_cpu_table_compares_the_sums_not_the_ratios() -> None:
    lines = report.cpu_table(_result([1.0, 8.0], [2.0, 8.0]))
    q1, q2, summed = lines[2], lines[3], lines[4]
    assert q1.startswith("| Q1 | 1.00 | 2.00 | 1.00 | 0.50\u00d7 | 1.00\u00d7 | 2.00\u00d7 |")
    assert "| 1.00\u00d7 |" in q2
    # (1 + 8) / (2 + 8), not the ratios' mean (0.75)
    assert summed.startswith("| five summed | 9.00 | 10.00 | 2.00 | 0.90\u00d7 | 4.50\u00d7 |")


def test_the_bar_says_which_of_its_conditions_are_met() -> None:
    met = report.against_base(_result([4.0, 4.0], [5.0, 5.0]))
    assert [line.split(":")[0] for line in met] == ["- met"] * 4
    missed = report.against_base(_result([4.0, 5.5], [5.0, 5.0], requests=(3, 4)))
    assert missed[0].startswith("- NOT met: five queries' API CPU summed, head/base 0.95\u00d7")
    assert missed[1].startswith("- NOT met: the worst query, Q2 1.10\u00d7")
    assert missed[2].startswith("- NOT met: DynamoDB requests per query equal: Q2 3 vs 4")


def test_without_a_base_there_is_no_head_over_base_column_or_bar() -> None:
    result = _result([1.0], [2.0])
    result["sides"] = [s for s in result["sides"] if s["label"] != "base"]
    assert "head/base" not in report.cpu_table(result)[0]
    assert report.against_base(result) == []


def test_the_printed_report_holds_every_table_and_the_bar() -> None:
    result = _result([4.0, 4.0], [5.0, 5.0])
    result["throughput"].update(seconds=12, rounds=4, warmup_seconds=2, workers=2)
    result.update(
        started_utc="2026-11-28T22:00:00Z",
        dataset="500 students",
        params={"requests": 500, "warmup": 300, "peer_warmup": 2000, "block": 10},
        env={"cpus": 2, "python": "3.11.2"},
    )
    text = report.render(result)
    assert "(PostGraphile 2000 more warm-up first)" in text
    assert "| five summed | 8.00 | 10.00 | 2.00 | 0.80\u00d7 | 4.00\u00d7 | 5.00\u00d7 |" in text
    assert "| head/base | 1.20\u00d7 |" in text
    assert "- met: Q1 \u00d716 requests/s, head/base 1.20\u00d7 (bar: at least 1.15\u00d7)" in text


def test_a_query_the_base_was_not_asked_is_left_out_of_its_sums_and_bars() -> None:
    """Q6 (the search by name) is asked of head and the peer only: the five's sums, the worst
    query and the requests' bar stay the five's, and its own row shows head and the peer."""
    result = _result([4.0, 4.0, 4.0, 4.0, 4.0], [5.0, 5.0, 5.0, 5.0, 5.0])
    result["queries"].append(
        {
            "name": "Q6",
            "title": "",
            "sides": {
                "head": {"cpu_ms_per_request": 9.0, "median_ms": 5, "dynamodb_requests": 1},
                "PostGraphile": {"cpu_ms_per_request": 1.0, "median_ms": 2},
            },
        }
    )
    assert report.summed(result, "head") == 20.0
    assert [line.split(":")[0] for line in report.against_base(result)] == ["- met"] * 4
    q6 = next(line for line in report.cpu_table(result) if line.startswith("| Q6 "))
    assert q6.startswith("| Q6 | 9.00 | n/a | 1.00 | n/a | 9.00\u00d7 |")


SCALE_HEAD = """16 writers, one API worker, items held 15 ms, 10 s a case, on the embedded backend
| case | rate | failed | conflicts | hot / spread |
|---|---:|---:|---:|---:|
| enrollStudent, a class each | 150.2 /s | 0 | 0 |  |
| enrollStudent, all into one class | 140.0 /s | 0 | 0 | 0.93x |
graph-api check: clean
"""
SCALE_BASE = SCALE_HEAD.replace("140.0 /s", "33.3 /s").replace("0.93x", "0.22x")
SCALE_BASE = SCALE_BASE.replace("clean", "2 findings")


def test_bench_scale_with_a_base_prints_each_case_of_head_beside_the_base_s() -> None:
    from bench import scale

    table = scale.side_by_side(SCALE_HEAD, SCALE_BASE, "a6fde19").splitlines()
    assert table[0] == "head beside base a6fde19"
    assert table[3] == "| enrollStudent, a class each | 150.2 /s | 150.2 /s | 0 | 0 | 0 | 0 |  |  |"
    assert table[4] == (
        "| enrollStudent, all into one class | 140.0 /s | 33.3 /s | 0 | 0 | 0 | 0 | 0.93x | 0.22x |"
    )
    assert table[5] == "graph-api check: head clean, base 2 findings"


def test_bench_scale_stops_in_one_line_when_the_base_has_no_bench_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A base from before bench/scale.py (df474a8, `make bench`'s base) cannot run it: said
    so, naming the ref, before its checkout and venv are made."""
    from bench import scale, servers

    def no_checkout(ref: str) -> Any:
        raise AssertionError(f"a checkout of {ref} was made")

    monkeypatch.setattr(servers, "holds", lambda ref, path: path != scale.SCRIPT)
    monkeypatch.setattr(servers, "added", lambda path: "7142a2b")
    monkeypatch.setattr(servers, "base", no_checkout)
    with pytest.raises(SystemExit) as stopped:
        scale.run_base("df474a8", 1.0, 0.015)
    assert stopped.value.code == (
        "make bench-scale: BASE=df474a8 has no bench/scale.py; BASE must be a commit that has"
        " it (it came in 7142a2b)"
    )


def test_a_ref_holds_the_files_of_its_tree_only() -> None:
    from bench import servers

    assert servers.holds("HEAD", "bench/scale.py")
    assert not servers.holds("HEAD", "bench/no-such-file.py")
