"""Reading a span file into traces, streamed: a file of many traces never sits in memory whole.

A span file is JSONL (one record per line: collector file exports, Phoenix, Agents SDK
processors, LangSmith runs) or one JSON document (a record, a list of records, or a wrapper such as
``{"data": [...]}``). Lines are decoded one by one; a document over ``_WHOLE_LIMIT`` bytes is
streamed with ijson, item by item (``resourceSpans``, the top-level list, ``data``/``runs``).

Spans are grouped by trace id. A trace is finished when its record is a whole trace (TRAIL,
Langfuse, a LangSmith run tree) or at the end of the file; while reading, once the spans held exceed
``_PENDING_CHARS`` characters, traces whose root span has been read and that the last record did
not touch are finished early (exports write a trace's spans close together: an OTLP exporter
writes the root last, Phoenix writes a trace's spans together). A span that comes for a trace
finished that way is refused with its record named, never silently made into a second trace.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

import ijson
import orjson

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.spans import conventions, langfuse, langsmith, openai_agents
from traces.parsers.spans.model import Span
from traces.parsers.spans.openinference import is_span_record, record_span
from traces.parsers.spans.otlp import is_otlp, otlp_spans
from traces.parsers.spans.trail import is_trail, trail_spans
from traces.parsers.spans.tree import spans_to_trace

_WHOLE_LIMIT = 32 * 1024**2
_PENDING_CHARS = 16 * 1024**2
_CHUNK = 1 << 20

# format name -> (words only that format's head has, framework, what was looked for)
SNIFF: dict[str, tuple[tuple[str, ...], str, str]] = {
    "otlp": (('"resourceSpans"',), "", conventions.LOOKED_FOR),
    "trail": (('"child_spans"', '"span_attributes"'), "smolagents", conventions.LOOKED_FOR),
    "openai_agents": (('"span_data"', '"trace.span"'), openai_agents.FRAMEWORK, openai_agents.LOOKED_FOR),
    "langfuse": (('"observations"',), "", langfuse.LOOKED_FOR),
    "langsmith": (('"run_type"',), "LangChain", langsmith.LOOKED_FOR),
    "openinference": (('"openinference.span.kind"', '"span_kind"', '"context.span_id"'), "", conventions.LOOKED_FOR),
}
SPAN_FORMATS = tuple(SNIFF)
_LABELS = {
    "otlp": "OTLP/JSON",
    "trail": "TRAIL",
    "openai_agents": "OpenAI Agents SDK",
    "langfuse": "Langfuse",
    "langsmith": "LangSmith",
    "openinference": "OpenInference",
}


def sniff(head: str) -> str:
    """The span format whose keys appear in the first bytes of a JSON file, or ""."""
    for name, (words, _fw, _lf) in SNIFF.items():
        if not any(w in head for w in words):
            continue
        if name == "openinference" and '"span_id"' not in head and '"context.span_id"' not in head:
            continue
        # smolagents memory steps also have "observations": a Langfuse trace has observation ids
        if name == "langfuse" and not any(w in head for w in ('"parentObservationId"', '"GENERATION"', '"traceId"')):
            continue
        return name
    return ""


@dataclass
class _Pending:
    spans: list[Span] = field(default_factory=list)
    chars: int = 0
    first_record: int = 0
    last_record: int = 0
    root_seen: bool = False
    info: dict = field(default_factory=dict)


class _Grouper:
    def __init__(self, build: Callable[[str, _Pending], ParsedTrace], filename: str) -> None:
        self.build = build
        self.filename = filename
        self.pending: dict[str, _Pending] = {}
        self.done: set[str] = set()
        self.chars = 0

    def add(self, span: Span, record: int) -> None:
        key = span.trace
        if key in self.done:
            raise ParseError(
                f"span {span.id} of trace {key} comes long after the rest of that trace (more than "
                f"{_PENDING_CHARS // 1024**2} MB of other spans between): sort the file by trace id or split it",
                filename=self.filename,
                record=record,
            )
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = _Pending(first_record=record)
        p.spans.append(span)
        size = span.size()
        p.chars += size
        self.chars += size
        p.last_record = record
        p.root_seen = p.root_seen or not span.parent

    def info(self, key: str, info: dict, record: int) -> None:
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = _Pending(first_record=record)
        p.info.update(info)

    def finish(self, key: str) -> ParsedTrace | None:
        p = self.pending.pop(key, None)
        if p is None:
            return None
        self.done.add(key)
        self.chars -= p.chars
        return self.build(key, p) if p.spans else None

    def over_budget(self, record: int) -> Iterator[ParsedTrace]:
        if self.chars <= _PENDING_CHARS:
            return
        for key in [k for k, p in self.pending.items() if p.root_seen and p.last_record < record - 1]:
            trace = self.finish(key)
            if trace is not None:
                yield trace
            if self.chars <= _PENDING_CHARS // 2:
                return

    def rest(self) -> Iterator[ParsedTrace]:
        for key in list(self.pending):
            p = self.pending[key]
            if not p.spans:
                raise ParseError(
                    f"trace {key} is named but none of its spans is in the file",
                    filename=self.filename,
                    record=p.first_record,
                )
            trace = self.finish(key)
            if trace is not None:
                yield trace


def read_spans(
    fileobj: IO[bytes], *, format: str, filename: str = "", broken: list[tuple[int, str]] | None = None
) -> Iterator[ParsedTrace]:
    """Every trace of a span file (binary file object), in the order the traces start; with
    ``broken``, JSONL lines that are not JSON are listed there as (line, why) and skipped."""
    if format not in SNIFF:
        raise ValueError(f"not a span format: {format}")
    _words, framework, looked_for = SNIFF[format]
    label = _LABELS[format]

    def build(key: str, p: _Pending) -> ParsedTrace:
        trace = spans_to_trace(
            p.spans,
            format=format,
            filename=filename,
            record=p.first_record,
            mas_name=framework,
            looked_for=looked_for,
            info=p.info,
        )
        if format == "trail":
            trace.benchmark = trace.benchmark or "TRAIL"
            if "trail_labels" in p.info:
                trace.metadata["trail_labels"] = p.info["trail_labels"]
        return trace

    grouper = _Grouper(build, filename)
    order = 0
    for record, obj in _records(fileobj, filename, broken):
        if not isinstance(obj, dict):
            raise ParseError(
                f"{label}: record is {type(obj).__name__}, expected an object", filename=filename, record=record
            )
        for item in _units(obj, format, label, filename=filename, record=record):
            if isinstance(item, Span):
                order += 1
                item.order = order
                grouper.add(item, record)
            elif isinstance(item, tuple):  # (trace id, trace-level info)
                grouper.info(item[0], item[1], record)
            else:  # a whole trace ends here
                trace = grouper.finish(item)
                if trace is not None:
                    yield trace
        yield from grouper.over_budget(record)
    yield from grouper.rest()


def _units(obj: dict, format: str, label: str, *, filename: str, record: int) -> Iterator[Span | tuple | str]:
    """Spans, (trace id, info) pairs, and the trace id of a trace a record completes."""
    if format == "otlp":
        if not is_otlp(obj):
            raise ParseError(f"{label}: record has no 'resourceSpans' list", filename=filename, record=record)
        yield from otlp_spans(obj, filename=filename, record=record, order=0)
    elif format == "openinference":
        if not is_span_record(obj):
            raise ParseError(
                f"{label}: record is not a span (no context.span_id and attributes)", filename=filename, record=record
            )
        yield record_span(obj, filename=filename, record=record, order=0)
    elif format == "trail":
        if not is_trail(obj):
            raise ParseError(
                f"{label}: record has no 'spans' list of spans with span_attributes", filename=filename, record=record
            )
        key = ""
        for span in trail_spans(obj, filename=filename, record=record):
            key = span.trace = span.trace or f"record-{record + 1}"
            yield span
        if obj.get("labels") is not None:  # a TRAIL file that carries its annotations (a source rater's errors)
            yield key, {"trail_labels": obj["labels"]}
        yield key
    elif format == "langfuse":
        if not langfuse.is_langfuse(obj):
            raise ParseError(
                f"{label}: record is not a trace with an 'observations' list", filename=filename, record=record
            )
        key = ""
        for span in langfuse.langfuse_spans(obj, filename=filename, record=record):
            key = span.trace
            yield span
        yield key
    elif format == "langsmith":
        if not langsmith.is_langsmith(obj):
            raise ParseError(
                f"{label}: record is not a run (no run_type and inputs/outputs)", filename=filename, record=record
            )
        spans = list(langsmith.langsmith_spans(obj, filename=filename, record=record))
        key = spans[0].trace or spans[0].id
        for span in spans:
            span.trace = span.trace or key
            yield span
        if obj.get("child_runs") and not obj.get("parent_run_id"):
            yield key  # a whole run tree
    elif format == "openai_agents":
        if openai_agents.is_agents_bundle(obj):
            trace = obj["trace"]
            key = str(trace.get("id") or "")
            yield key, openai_agents.trace_info(trace)
            for n, span in enumerate(obj["spans"]):
                if not isinstance(span, dict):
                    raise ParseError(f"{label}: span {n + 1} is not an object", filename=filename, record=record)
                yield openai_agents.agents_span(span, filename=filename, record=record, order=0)
            yield key
        elif obj.get("object") == "trace":
            yield str(obj.get("id") or ""), openai_agents.trace_info(obj)
        elif openai_agents.is_agents_object(obj):
            yield openai_agents.agents_span(obj, filename=filename, record=record, order=0)
        else:
            raise ParseError(f"{label}: record is neither a trace nor a trace.span", filename=filename, record=record)


def _loads(raw: bytes | str) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw, parse_constant=lambda _c: None)  # NaN / Infinity, which orjson refuses


_WRAPPERS = ("data", "runs", "traces", "items")


def _records(
    fileobj: IO[bytes], filename: str, broken: list[tuple[int, str]] | None = None
) -> Iterator[tuple[int, object]]:
    head = fileobj.read(_CHUNK)
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    while b"\n" not in start and len(head) < _WHOLE_LIMIT:  # a first line longer than a chunk (OTLP batches)
        more = fileobj.read(_CHUNK)
        if not more:
            break
        head += more
        start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start:
        raise ParseError("the file is empty", filename=filename, line=1)
    first_line = start.split(b"\n", 1)[0].rstrip()
    if start[:1] == b"{" and first_line.endswith(b"}") and _is_object(first_line):
        yield from _jsonl(head, fileobj, filename, broken)
        return
    rest = fileobj.read(_WHOLE_LIMIT)
    data = head + rest
    if len(rest) < _WHOLE_LIMIT:
        try:
            doc = _loads(data.lstrip(b"\xef\xbb\xbf"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ParseError(f"invalid JSON ({e})", filename=filename) from None
        yield from _document_records(doc)
        return
    yield from _stream_document(data, fileobj, filename)


def _is_object(line: bytes) -> bool:
    try:
        return isinstance(_loads(line), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def _document_records(doc: object) -> Iterator[tuple[int, object]]:
    if isinstance(doc, dict):
        for key in _WRAPPERS:
            if isinstance(doc.get(key), list) and not is_otlp(doc):
                yield from enumerate(doc[key])
                return
        yield 0, doc
    elif isinstance(doc, list):
        yield from enumerate(doc)
    else:
        yield 0, doc


def _stream_document(data: bytes, fileobj: IO[bytes], filename: str) -> Iterator[tuple[int, object]]:
    """A document too big to decode at once: its list items one by one (ijson)."""
    stream = _Chain(data, fileobj)
    first = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    head = data[:65536].decode("utf-8", "replace")
    if first == b"[":
        prefix = "item"
    elif '"resourceSpans"' in head:
        prefix = "resourceSpans.item"
    else:
        prefix = next((f"{k}.item" for k in _WRAPPERS if f'"{k}"' in head), "")
        if not prefix:
            raise ParseError(
                f"a JSON document over {_WHOLE_LIMIT // 1024**2} MB must be a list (or JSONL)", filename=filename
            )
    try:
        for n, item in enumerate(ijson.items(stream, prefix, use_float=True)):
            yield n, ({"resourceSpans": [item]} if prefix == "resourceSpans.item" else item)
    except ijson.JSONError as e:
        raise ParseError(f"invalid JSON ({e})", filename=filename) from None


class _Chain(io.RawIOBase):
    def __init__(self, head: bytes, fileobj: IO[bytes]) -> None:
        self.head, self.fileobj = head, fileobj

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.fileobj.read(n if n and n > 0 else _CHUNK)


def _jsonl(
    head: bytes, fileobj: IO[bytes], filename: str, broken: list[tuple[int, str]] | None = None
) -> Iterator[tuple[int, object]]:
    buf, line_no, record, eof = head, 0, 0, False
    while not eof:
        chunk = fileobj.read(_CHUNK)
        eof = not chunk
        buf += chunk
        if not eof and b"\n" not in chunk:
            continue
        lines = buf.split(b"\n")
        buf = b"" if eof else lines.pop()
        for raw in lines:
            line_no += 1
            if not raw.strip():
                continue
            try:
                obj = _loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                why = f"invalid JSON line ({e})"
                if broken is None:
                    raise ParseError(why, filename=filename, record=record, line=line_no) from None
                broken.append((line_no, why))
                continue
            yield record, obj
            record += 1
