"""Parsing a trajectory embedded in another format's record (MAST-Data, AdaMAST raw trajectories).

Those formats hand the embedded text to the full reader (detection, every format), which lives in
the package and imports them to register them. Rather than import the package back (a cycle), they
call `parse_embedded`, which the package wires to its reader when it loads (`embedded_reader_set`).
"""

from __future__ import annotations

from collections.abc import Callable

from traces.parsers.base import ParsedTrace

_reader: Callable[..., ParsedTrace] | None = None


def embedded_reader_set(reader: Callable[..., ParsedTrace]) -> None:
    global _reader
    _reader = reader


def parse_embedded(text: str, *, format: str = "auto", filename: str = "", mas_name: str = "") -> ParsedTrace:
    """Parse one embedded trajectory with the package's reader (``traces.parsers.parse_trace``)."""
    if _reader is None:  # importing traces.parsers (which every caller does) sets it
        raise RuntimeError("traces.parsers is not loaded: import it before parsing embedded trajectories")
    return _reader(text, format=format, filename=filename, mas_name=mas_name)
