"""`make bench-layers`' grouping: which layer a profiled function's self time is charged to."""

from __future__ import annotations

import pytest

from bench import layers

VENV = "/srv/app/.venv/lib/python3.11/site-packages/"
STDLIB = "/usr/lib/python3.11/"


@pytest.mark.parametrize(
    ("filename", "function", "expected"),
    [
        (VENV + "uvicorn/protocols/http/h11_impl.py", "send", layers.HTTP),
        (VENV + "h11/_connection.py", "next_event", layers.HTTP),
        ("/srv/app/graph_api/http/middleware.py", "__call__", layers.HTTP),
        ("/srv/app/graph_api/http/endpoint.py", "encode_json", layers.SERIALIZE),
        ("/srv/app/graph_api/http/endpoint.py", "parse_json", layers.HTTP),
        (VENV + "graphql/language/parser.py", "parse_field", layers.PARSE),
        (VENV + "graphql/validation/validate.py", "validate", layers.PARSE),
        ("/srv/app/graph_api/graph/engine/limits.py", "measure", layers.PARSE),
        ("/srv/app/graph_api/graph/engine/plan/walk.py", "walk", layers.PLAN),
        (VENV + "graphql/execution/execute.py", "execute_field", layers.EXECUTION),
        (VENV + "strawberry/schema/schema.py", "execute", layers.EXECUTION),
        ("/srv/app/graph_api/graph/types/student.py", "classes", layers.EXECUTION),
        ("/srv/app/graph_api/store/loaders.py", "load", layers.EXECUTION),
        (VENV + "aiodynamo/sign.py", "signed_headers", layers.WIRE),
        (VENV + "aiohttp/client_reqrep.py", "send", layers.WIRE),
        (STDLIB + "ssl.py", "read", layers.WIRE),
        ("/srv/app/graph_api/store/wire.py", "post", layers.WIRE),
        ("/srv/app/graph_api/store/codec.py", "decode", layers.DECODE),
        ("~", "<built-in method orjson.loads>", layers.DECODE),
        (STDLIB + "asyncio/events.py", "_run", layers.LOOP),
        ("~", "<method 'run_until_complete' of 'uvloop.loop.Loop' objects>", layers.LOOP),
        # Shared helpers belong to whoever called them.
        (STDLIB + "functools.py", "wraps", None),
        ("~", "<built-in method builtins.isinstance>", None),
        ("~", "<built-in method orjson.dumps>", None),
    ],
)
def test_each_library_and_module_is_charged_to_its_layer(
    filename: str, function: str, expected: str | None
) -> None:
    assert layers.layer(filename, function) == expected


def test_a_shared_helpers_self_time_goes_to_its_callers_layers_in_proportion() -> None:
    parse = (VENV + "graphql/language/parser.py", 1, "parse")
    wire = ("/srv/app/graph_api/store/wire.py", 1, "post")
    helper = (STDLIB + "functools.py", 1, "helper")
    # pstats' rows: (primitive calls, calls, self s, cumulative s, {caller: (calls, _, self s, _)})
    stats = {
        parse: (1, 1, 1.0, 2.0, {}),
        wire: (1, 1, 2.0, 4.0, {}),
        helper: (4, 4, 4.0, 4.0, {parse: (1, 1, 1.0, 1.0), wire: (3, 3, 3.0, 3.0)}),
    }
    charged = layers.charge(stats, (0.0, 0.0))
    assert charged[layers.PARSE] == pytest.approx(1.0 + 1.0)
    assert charged[layers.WIRE] == pytest.approx(2.0 + 3.0)
    # cProfile's own cost, per call received and per call made, is taken off.
    charged = layers.charge(stats, (0.1, 0.05))
    assert charged[layers.PARSE] == pytest.approx(1.0 - 0.1 - 0.05 + (4.0 - 0.4) / 4)
