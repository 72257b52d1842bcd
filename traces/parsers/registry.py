"""The registry of trace formats: what ``parse_trace``, detection and the import form offer.

A text format is one module with a ``parse_<name>(text) -> ParsedTrace`` function and the
marker lines only it writes; ``traces/parsers/__init__.py`` registers it with one
``format_register(...)`` line, in the order detection should prefer on a tie.

A JSON format is one module with ``sniff(head) -> bool`` (does the first 64 KB of the file, as
text, have this format's keys?) and ``parse_<name>(obj, filename) -> ParsedTrace | list[ParsedTrace]``
(the decoded JSON in: a JSONL file arrives as the list of its lines' objects; a list out when one
file holds several traces, one per record), registered with
``TraceFormat("<name>", kind="json", sniff=..., parse_obj=..., label=...)``. Sniffers are asked in
registration order, before the older shapes (MetaGPT run JSON, AG2 / HyperAgent ``_human.json``,
Who&When, generic messages), which ``detect.detect_json`` and ``_parse_json`` still decide by key.
``--format``, the API's and the upload form's format lists all come from ``formats()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from traces.parsers.base import ParsedTrace


@dataclass(frozen=True)
class TraceFormat:
    name: str
    kind: str = "text"  # "text" or "json"
    parse: Callable[[str], ParsedTrace] | None = None  # text formats: the whole decoded file in, a trace out
    # Line patterns that only this format writes; searched in the first 64 KB, the earliest match wins.
    markers: tuple[re.Pattern[str], ...] = field(default_factory=tuple)
    mas_name: str = ""  # the framework whose traces look like this (used when no marker is found)
    filename_suffixes: tuple[str, ...] = ()  # e.g. Magentic-One's console_log.txt
    label: str = ""  # what the import form and the import report call it
    sniff: Callable[[str], bool] | None = None  # JSON formats: the file's head has this format's keys
    parse_obj: Callable[[object, str], ParsedTrace | list[ParsedTrace]] | None = None  # decoded JSON in

    @property
    def title(self) -> str:
        return self.label or self.name


_FORMATS: dict[str, TraceFormat] = {}


def format_register(fmt: TraceFormat) -> TraceFormat:
    if fmt.kind not in ("text", "json"):
        raise ValueError(f"format {fmt.name}: kind must be text or json")
    if fmt.kind == "text" and fmt.parse is None:
        raise ValueError(f"text format {fmt.name} needs a parse function")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> list[TraceFormat]:
    return list(_FORMATS.values())


def json_format(name: str) -> TraceFormat | None:
    """A JSON format with its own parse function (``parse_obj``), or None."""
    fmt = _FORMATS.get(name)
    return fmt if fmt is not None and fmt.parse_obj is not None else None


def sniff_json(head: str) -> str:
    """The first registered JSON format whose sniffer recognises the head, or ""."""
    for fmt in _FORMATS.values():
        if fmt.sniff is not None and fmt.sniff(head):
            return fmt.name
    return ""


def text_format(name: str) -> TraceFormat | None:
    fmt = _FORMATS.get(name)
    return fmt if fmt is not None and fmt.kind == "text" else None
