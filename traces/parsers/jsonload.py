"""JSON decoding for the importer: orjson where it is safe, the standard library where it is not.

orjson is 2-4x faster on the large string values traces are made of, but it is strict: it
refuses ``NaN`` / ``Infinity`` (real MAST-Data copies have bare ``NaN`` labels), lone surrogate
escapes (``"\\ud800"``) and reads integers beyond 64 bits as floats. So every value orjson refuses
is decoded again with ``json.loads``, which reads ``NaN`` / ``Infinity`` as ``None`` (PostgreSQL's
``jsonb`` cannot store them, and a label that is not a number is no label) and keeps surrogates
for ``prep.make_storable`` to replace and count. The standard library's error (message, line,
column) is the one a person sees.
"""

from __future__ import annotations

import json

import orjson

__all__ = ["JSONDecodeError", "loads", "loads_complete"]

JSONDecodeError = json.JSONDecodeError
_TRUNCATED = "unexpected end of data"


def _no_constant(_name: str) -> None:
    return None


TOO_DEEP = "nested too deeply (over 1,000 levels of arrays and objects): not a trace this reader takes"


def _stdlib(data: bytes | str) -> object:
    """``json.loads``; JSON nested deeper than the interpreter's stack is bad input, said as such
    (a RecursionError would read as a crash, and a retry would fail again)."""
    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise JSONDecodeError(TOO_DEEP, data if isinstance(data, str) else "", 0) from None


def loads(data: bytes | str) -> object:
    """Decode one JSON document; raises json.JSONDecodeError (with line and column) when invalid."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    return _stdlib(data)


def loads_complete(data: bytes) -> tuple[bool, object]:
    """(True, value) when ``data`` is one complete JSON document, (False, None) when it is not.

    Used to try a guessed record boundary: a slice cut short of its record's end is never valid
    JSON (an object is valid only up to its own closing brace), so a wrong guess is refused here.
    """
    try:
        return True, orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if e.msg == _TRUNCATED:
            return False, None
    try:
        return True, _stdlib(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False, None
