"""The registry of trace formats: what ``parse_trace``, detection and the import form offer.

A text format is one module with a ``parse_<name>(text) -> ParsedTrace`` function and the
marker lines only it writes; ``traces/parsers/__init__.py`` registers it with one
``format_register(...)`` line, in the order detection should prefer on a tie. JSON shapes are
registered by name too (``kind="json"``); which JSON shape a file has is decided from its keys in
``detect.detect_json`` and ``_parse_json``. Span formats (``kind="spans"``, ``traces/parsers/spans/``)
hold many traces per file: ``read(fileobj, filename=)`` streams them, and the importer reads such a
file with it instead of decoding it whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from traces.parsers.base import ParsedTrace


@dataclass(frozen=True)
class TraceFormat:
    name: str
    kind: str = "text"  # "text", "json" or "spans"
    parse: Callable[[str], ParsedTrace] | None = None  # text formats: the whole decoded file in, a trace out
    # Line patterns that only this format writes; searched in the first 64 KB, the earliest match wins.
    markers: tuple[re.Pattern[str], ...] = field(default_factory=tuple)
    mas_name: str = ""  # the framework whose traces look like this (used when no marker is found)
    filename_suffixes: tuple[str, ...] = ()  # e.g. Magentic-One's console_log.txt
    # span formats: (binary file object, filename=) -> iterator of ParsedTrace, one per trace in the file
    read: Callable[..., Iterator[ParsedTrace]] | None = None


_FORMATS: dict[str, TraceFormat] = {}


def format_register(fmt: TraceFormat) -> TraceFormat:
    if fmt.kind not in ("text", "json", "spans"):
        raise ValueError(f"format {fmt.name}: kind must be text, json or spans")
    if fmt.kind == "spans" and fmt.read is None:
        raise ValueError(f"span format {fmt.name} needs a read function")
    if fmt.kind == "text" and fmt.parse is None:
        raise ValueError(f"text format {fmt.name} needs a parse function")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> list[TraceFormat]:
    return list(_FORMATS.values())


def text_format(name: str) -> TraceFormat | None:
    fmt = _FORMATS.get(name)
    return fmt if fmt is not None and fmt.kind == "text" else None


def span_format(name: str) -> TraceFormat | None:
    fmt = _FORMATS.get(name)
    return fmt if fmt is not None and fmt.kind == "spans" else None


def register_span_formats() -> None:
    """The span formats (traces/parsers/spans/), listed after the text and JSON formats."""
    from traces.parsers.spans import read_spans

    for name, framework in (
        ("otlp", ""),
        ("openinference", ""),
        ("trail", "smolagents"),
        ("langfuse", ""),
        ("langsmith", "LangChain"),
        ("openai_agents", "OpenAI Agents SDK"),
    ):
        format_register(TraceFormat(name, kind="spans", read=partial(read_spans, format=name), mas_name=framework))
