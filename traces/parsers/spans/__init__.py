"""Span-based trace formats: OTLP/JSON (OpenTelemetry GenAI or OpenInference attributes),
OpenInference span records (Phoenix), TRAIL, Langfuse, LangSmith, OpenAI Agents SDK.

Each format module reads its records into ``model.Span`` s; ``tree.spans_to_trace`` turns one
trace's spans into steps that keep their parent; ``reader.read_spans`` streams a file of many
traces. ``parse_spans`` reads a text that holds exactly one trace (what ``parse_trace`` needs).
"""

from __future__ import annotations

import io

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.spans.reader import SPAN_FORMATS, read_spans, sniff
from traces.parsers.spans.trail import parse_trail

__all__ = ["SPAN_FORMATS", "parse_spans", "parse_trail", "read_spans", "sniff"]


def parse_spans(text: str, *, format: str, filename: str = "") -> ParsedTrace:
    """The one trace a span text holds; a text of several traces is refused (import the file instead)."""
    traces = list(read_spans(io.BytesIO(text.encode("utf-8", "surrogatepass")), format=format, filename=filename))
    if len(traces) != 1:
        raise ParseError(
            f"{format}: the text holds {len(traces)} traces where one was expected (import it as a file: "
            "the importer reads every trace of a span file)",
            filename=filename,
        )
    return traces[0]
