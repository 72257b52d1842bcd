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
Span formats (``kind="spans"``, ``traces/parsers/spans/``) hold many traces per file:
``read(fileobj, filename=)`` streams them, and the importer reads such a file with it instead of
decoding it whole. ``--format``, the API's and the upload form's format lists all come from ``formats()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from traces.parsers.base import ParsedTrace
from traces.parsers.spans import read_spans


@dataclass(frozen=True)
class TraceFormat:
    name: str
    kind: str = "text"  # "text", "json" or "spans"
    parse: Callable[[str], ParsedTrace] | None = None  # text formats: the whole decoded file in, a trace out
    # Line patterns that only this format writes; searched in the first 64 KB, the earliest match wins.
    markers: tuple[re.Pattern[str], ...] = field(default_factory=tuple)
    mas_name: str = ""  # the framework whose traces look like this (used when no marker is found)
    filename_suffixes: tuple[str, ...] = ()  # e.g. Magentic-One's console_log.txt
    label: str = ""  # what the import form and the import report call it
    sniff: Callable[[str], bool] | None = None  # JSON formats: the file's head has this format's keys
    parse_obj: Callable[[object, str], ParsedTrace | list[ParsedTrace]] | None = None  # decoded JSON in
    # span formats: (binary file object, filename=) -> iterator of ParsedTrace, one per trace in the file
    read: Callable[..., Iterator[ParsedTrace]] | None = None

    @property
    def title(self) -> str:
        return self.label or self.name


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


def span_format(name: str) -> TraceFormat | None:
    fmt = _FORMATS.get(name)
    return fmt if fmt is not None and fmt.kind == "spans" else None


def register_span_formats() -> None:
    """The span formats (traces/parsers/spans/), listed after the text and JSON formats."""

    for name, framework, label in (
        ("otlp", "", "OTLP/JSON spans (OpenTelemetry GenAI)"),
        ("openinference", "", "OpenInference spans (Phoenix)"),
        ("trail", "smolagents", "TRAIL trace (OpenInference child_spans)"),
        ("langfuse", "", "Langfuse trace export"),
        ("langsmith", "LangChain", "LangSmith runs export"),
        ("openai_agents", "OpenAI Agents SDK", "OpenAI Agents SDK trace"),
    ):
        format_register(
            TraceFormat(name, kind="spans", read=partial(read_spans, format=name), mas_name=framework, label=label)
        )
