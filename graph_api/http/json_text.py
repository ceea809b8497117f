"""Decoding a request's JSON (an HTTP body, a GET's `variables`, a websocket message): one
function, with a bound on nesting.

`json.loads` recurses once per level of nesting: 40,000 `[` end in a RecursionError, which
nothing above expects (a websocket closed with 1006, not 4400). A text nested deeper than
MAX_DEPTH is refused as bad JSON before it is decoded. The standard decoder stays: it keeps
integers of any size and escaped lone surrogates as the client wrote them, which the
GraphQL layer then judges (orjson would round the first and refuse the second as bad JSON).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

# Far deeper than any GraphQL request's variables (this schema's inputs nest a few levels),
# and far below Python's recursion limit of 1,000, whatever the stack depth of the caller.
MAX_DEPTH = 128

# A JSON string, escapes and all (unrolled: no backtracking); what is left are the brackets.
# A string never closed runs to the end of the text: were the closing quote required, each
# escaped quote after an opening one would start a match that scans to the end again
# (quadratic in the text's length, on the event loop).
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_STRINGS_B = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS_B = re.compile(rb"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_STEP_B = {b"[": 1, b"{": 1, b"]": -1, b"}": -1}


def loads(data: str | bytes) -> object:
    """`data` decoded as JSON. Raises json.JSONDecodeError (a ValueError) for bad JSON and
    for nesting deeper than MAX_DEPTH, UnicodeDecodeError (a ValueError) for bytes that are
    not UTF-8."""
    if _opened(data) > MAX_DEPTH and depth(data) > MAX_DEPTH:
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        raise json.JSONDecodeError(f"nested deeper than {MAX_DEPTH} levels", text, 0)
    return json.loads(data)


def _opened(data: str | bytes) -> int:
    """How many arrays and objects `data` could open: a bound on its depth, counted fast."""
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    return data.count(b"[") + data.count(b"{")


def depth(data: str | bytes) -> int:
    """The deepest nesting of arrays and objects in `data` (brackets inside strings not
    counted); of a text that is not JSON, a figure at least as deep as a decoder would go."""
    if isinstance(data, str):
        steps = map(_STEP.__getitem__, _BRACKETS.findall(_STRINGS.sub("", data)))
    else:
        steps = map(_STEP_B.__getitem__, _BRACKETS_B.findall(_STRINGS_B.sub(b"", data)))
    return max(accumulate(steps), default=0)
