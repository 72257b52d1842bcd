"""TRAIL benchmark traces (Patronus AI; smolagents runs traced with OpenInference): one JSON
object per trace, ``{"trace_id", "spans": [...]}``, each span ``{"span_id", "parent_span_id",
"span_name", "span_kind", "timestamp", "duration", "status_code", "status_message",
"resource_attributes", "span_attributes": {OpenInference attributes}, "events", "child_spans":
[...]}`` with its children nested under ``child_spans``.

Entry point for other readers (the Hub's Parquet rows hold the same JSON as a string in their
trace column): ``parse_trail(trace, filename=..., record=...)`` with a dict or a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.spans.conventions import LOOKED_FOR, fill
from traces.parsers.spans.model import Span, epoch, flatten, seconds
from traces.parsers.spans.tree import spans_to_trace


def is_trail(obj: object) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("spans"), list) or not obj["spans"]:
        return False
    first = obj["spans"][0]
    return isinstance(first, dict) and ("child_spans" in first or "span_attributes" in first)


def parse_trail(trace: dict | str, *, filename: str = "", record: int | None = None) -> ParsedTrace:
    """One TRAIL trace (a dict, or its JSON text) -> ParsedTrace. Raises ParseError naming file and record."""
    if isinstance(trace, str):
        try:
            trace = json.loads(trace)
        except ValueError as e:
            raise ParseError(f"TRAIL: invalid JSON ({e})", filename=filename, record=record) from None
    if not is_trail(trace):
        raise ParseError(
            "TRAIL: expected an object with a 'spans' list of spans with span_attributes/child_spans",
            filename=filename,
            record=record,
        )
    spans = list(trail_spans(trace, filename=filename, record=record))
    parsed = spans_to_trace(
        spans, format="trail", filename=filename, record=record, mas_name="smolagents", looked_for=LOOKED_FOR
    )
    parsed.benchmark = parsed.benchmark or "TRAIL"
    if trace.get("labels") is not None:  # a TRAIL file that carries its annotations: a source rater's located errors
        parsed.metadata["trail_labels"] = trace["labels"]
    return parsed


def trail_spans(trace: dict, *, filename: str, record: int | None) -> Iterator[Span]:
    trace_id = str(trace.get("trace_id") or "")
    order = 0
    stack = [(s, "") for s in reversed(trace["spans"])]
    while stack:
        raw, parent = stack.pop()
        if not isinstance(raw, dict):
            raise ParseError("TRAIL: a span is not an object", filename=filename, record=record)
        order += 1
        span_id = str(raw.get("span_id") or "")
        if not span_id:
            raise ParseError(
                f"TRAIL: span {raw.get('span_name', '?')!r} has no span_id", filename=filename, record=record
            )
        start = epoch(raw.get("timestamp") or raw.get("start_time"))
        dur = seconds(raw.get("duration"))
        if isinstance(raw.get("duration"), int) and dur and dur > 1e6:  # nanoseconds, as ClickHouse stores them
            dur = dur / 1e9
        code = str(raw.get("status_code") or "").upper()
        span = Span(
            id=span_id,
            trace=str(raw.get("trace_id") or trace_id),
            parent=str(raw.get("parent_span_id") or parent or ""),
            name=str(raw.get("span_name") or raw.get("name") or ""),
            order=order,
            record=record,
            start=start,
            end=start + dur if start is not None and dur is not None else None,
            error=str(raw.get("status_message") or "error") if code in ("ERROR", "STATUS_CODE_ERROR") else "",
        )
        attrs = flatten(raw.get("span_attributes") or {})
        events = [
            (str(e.get("Name") or e.get("name") or ""), flatten(e.get("Attributes") or e.get("attributes") or {}))
            for e in raw.get("events") or ()
            if isinstance(e, dict)
        ]
        fill(span, attrs, events)
        if raw.get("service_name"):
            span.info.setdefault("service", raw["service_name"])
        yield span
        stack.extend((c, span_id) for c in reversed(raw.get("child_spans") or ()))
