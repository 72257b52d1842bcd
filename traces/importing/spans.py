"""Importing a span file (OTLP, OpenInference, TRAIL, Langfuse, LangSmith, OpenAI Agents SDK):
streamed trace by trace through the format's ``read``, so a 200 MB export never sits in memory.

Each trace of the file becomes one Trace (title: the root span's name and the trace id); a trace
the parser refuses (no content, no agent) refuses the import with the file and record named, like
any other bad record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from traces.importing.results import TraceImportError
from traces.importing.sources import CountingReader, PrefixedReader, Source
from traces.parsers import ParsedTrace, ParseError
from traces.parsers.detect import looks_json
from traces.parsers.registry import TraceFormat, span_format
from traces.parsers.spans import sniff


def span_format_of(head: bytes, format: str) -> TraceFormat | None:
    """The span format to read this file with: the one asked for, or the one its first bytes show."""
    if format != "auto":
        return span_format(format)
    text = head.decode("utf-8", "replace")
    if not looks_json(text):
        return None
    name = sniff(text.lstrip("\ufeff \t\r\n"))
    return span_format(name) if name else None


def span_file_traces(
    source: Source,
    fmt: TraceFormat,
    head: bytes,
    f: IO[bytes],
    state: dict,
    broken: list[tuple[int, str]] | None = None,
) -> Iterator[tuple[ParsedTrace, str, dict[str, Any]]]:
    name = source.name

    def on_bytes(n: int) -> None:
        state["done"] = min(state["done"] + n, state["base"] + source.size)

    state["done"] += len(head)
    stream = CountingReader(f, name, on_bytes)
    n = 0
    try:
        extra = {} if broken is None else {"broken": broken}  # "import the rest" (read_spans)
        for parsed in fmt.read(PrefixedReader(head, stream), filename=name, **extra):
            n += 1
            parsed.metadata["source_file"] = name
            root = str(parsed.metadata.pop("title", "") or "")
            ident = parsed.external_id[:12]
            title = " · ".join(x for x in (root, ident) if x) or f"{name} trace {n}"
            yield parsed, title, {"source_file": name, "record_number": n - 1, "trace_id": parsed.external_id}
    except ParseError as e:
        parts = [name] + ([f"record {e.record + 1}"] if e.record is not None else [])
        parts += [f"line {e.line}"] if e.line is not None else []
        raise TraceImportError(f"{', '.join(parts)}: {e.reason}") from None
    if n == 0 and broken:
        raise TraceImportError(
            f"{name}, line {broken[0][0]}: every line is broken ({len(broken)}); the first: {broken[0][1]}"
        )
    if n == 0:
        raise TraceImportError(f"{name}: {fmt.name}: the file holds no trace")
