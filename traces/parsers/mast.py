"""MAST-Data files (``MAD_full_dataset.json``, ``MAD_human_labelled_dataset.json``), streamed.

Full-dataset records: ``{mas_name, llm_name, benchmark_name, trace_id,
trace: {key, index, trajectory}, mast_annotation: {"1.1": 0|1|null, ...}}``.
Human-labelled records: ``{round, mas_name, benchmark_name, trace_id, trace: "<native text>",
annotations: [{"failure mode", annotator_1, annotator_2, annotator_3}]}``.
A JSON array is read with ijson, JSONL line by line: memory stays bounded by one record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import IO

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.detect import HEAD, detect_json, looks_json, normalise_mas_name
from traces.parsers.embedded import parse_embedded
from traces.parsers.jsonload import loads, loads_complete

_CHUNK = 1 << 20


@dataclass
class MastRecord:
    number: int
    mas_name: str
    llm_name: str
    benchmark_name: str
    trace_id: str
    key: str
    index: str | int | None
    trajectory: str
    mast_annotation: dict[str, int | None] | None
    round: str | int | None  # "Round 1", ..., "Generlazability" (sic) in the human-labelled file
    annotations: list[dict] | None
    # A MAST Studio release's own fields (``mast_studio``: final_source, final_basis, raters, judge,
    # release); a JSON string in Parquet. None in MAST-Data's own files.
    studio: dict | None = None


def is_mast_data(head: bytes) -> bool:
    """True when the first bytes look like a MAST-Data array or JSONL of records."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith((b"[", b"{")):
        return False
    if b'"history"' in head or b'"steps"' in head:  # Who&When records, already-parsed copies
        return False
    has_trace = b'"trace"' in head or b'"trajectory"' in head
    return has_trace and any(k in head for k in (b'"mas_name"', b'"mast_annotation"', b'"benchmark_name"'))


def iter_mast_records(
    fileobj: IO[bytes], *, filename: str = "", broken: list[tuple[int, str]] | None = None
) -> Iterator[MastRecord]:
    """Yield records one by one from a binary file object (JSON array or JSONL); with ``broken``,
    JSONL lines that are not JSON are listed there as (line, why) and skipped."""
    head = fileobj.read(_CHUNK)
    if isinstance(head, str):
        raise TypeError("iter_mast_records needs a binary file object")
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start:
        raise ParseError("empty file", filename=filename)
    if start.startswith(b"["):
        yield from _iter_array(_Prefixed(head, fileobj), filename)
    elif start.startswith(b"{"):
        yield from _iter_jsonl(head, fileobj, filename, broken)
    else:
        raise ParseError("not MAST-Data: expected a JSON array or JSONL", filename=filename, line=1)


class _Prefixed:
    """A read()-able that first returns bytes already read from the file."""

    def __init__(self, head: bytes, fileobj: IO[bytes]) -> None:
        self.head, self.fileobj = head, fileobj

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""  # ijson probes read(0) to tell bytes from str
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.fileobj.read(n if n and n > 0 else _CHUNK)


# Where a record of the array may end: its closing brace, then the comma and the opening brace
# and first quote of the next record (or the closing bracket at the end of the file). Inside a
# JSON string a quote is always escaped, so ``{"`` after ``}, `` rarely occurs there, and a wrong
# guess is caught anyway: a slice cut short of its record's end is never valid JSON.
_RECORD_END = re.compile(rb'\}(?=[ \t\r\n]*(?:,[ \t\r\n]*\{[ \t\r\n]*"|\][ \t\r\n]*\Z))')
_MAX_GUESSES = 8  # wrong guesses in one record before the token scanner reads it
_SEPARATORS = re.compile(rb"[\s,]*")


def _iter_array(stream: _Prefixed, filename: str) -> Iterator[MastRecord]:
    """Split the top-level array into records and decode each one (orjson, see jsonload).

    The fast path guesses where each record ends (``_RECORD_END``) and lets the decoder check the
    guess, so the bytes are scanned by C code only; a record it cannot place (not an object, too
    many wrong guesses, the end of the file) goes to the token scanner, which names the record and
    line of what is wrong. Only the current record and one chunk are held in memory. (Not ijson:
    real MAST-Data copies contain bare ``NaN`` labels, which the C parser behind ijson rejects.)
    """
    buf, eof = b"", False
    while not eof and not buf.lstrip(b"\xef\xbb\xbf \t\r\n"):
        more = stream.read(_CHUNK)
        eof = not more
        buf += more
    start = buf.lstrip(b"\xef\xbb\xbf \t\r\n")
    base_line = 1 + buf.count(b"\n", 0, len(buf) - len(start))
    buf, pos, number, want = start, 1, 0, _CHUNK  # just after the "["
    while True:
        sep = _SEPARATORS.match(buf, pos)
        pos = sep.end() if sep else pos
        if pos >= len(buf) and not eof:
            more = stream.read(_CHUNK)
            eof = not more
            base_line += buf.count(b"\n", 0, pos)
            buf, pos = buf[pos:] + more, 0
            continue
        if buf[pos : pos + 1] != b"{":
            _check_object(buf, pos, number, base_line, filename)
            break  # "]" or the end of the file: the scanner says which
        found, guesses, search_from = None, 0, pos
        while found is None and guesses < _MAX_GUESSES:
            m = _RECORD_END.search(buf, search_from)
            if m is None:
                if eof:
                    break
                more = stream.read(want)
                eof = not more
                want = min(want * 2, 64 * _CHUNK)
                search_from = max(pos, len(buf) - 64)  # the lookahead may have been cut by the chunk
                buf += more
                continue
            ok, item = loads_complete(buf[pos : m.end()])
            if ok:
                found = (m.end(), item)
            else:
                guesses += 1
                search_from = m.end()
        want = _CHUNK
        if found is None:
            break
        end, item = found
        line = base_line + buf.count(b"\n", 0, pos)
        yield record_from_dict(item, number, filename=filename, line=line)
        number += 1
        base_line += buf.count(b"\n", 0, end)
        buf, pos = buf[end:], 0
    yield from _scan_array(stream, buf[pos:], eof, number, base_line + buf.count(b"\n", 0, pos), filename)


_KINDS = {b"n": "null", b"t": "boolean", b"f": "boolean", b'"': "a string", b"[": "an array"}


def _check_object(buf: bytes, pos: int, number: int, base_line: int, filename: str) -> None:
    """Between records only "{", "]" or the end of the buffer may come: name anything else."""
    first = buf[pos : pos + 1]
    if first in (b"{", b"]", b""):
        return
    kind = _KINDS.get(first, "a number" if first in b"-0123456789" else "not JSON")
    line = base_line + buf.count(b"\n", 0, pos)
    raise ParseError(f"record is {kind}, expected an object", filename=filename, record=number, line=line)


# Strings (with escapes) as whole tokens, so brackets inside them are never counted;
# a lone quote means the string is not complete in the buffer yet.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]|"')


def _scan_array(
    stream: _Prefixed, buf: bytes, eof: bool, number: int, base_line: int, filename: str
) -> Iterator[MastRecord]:
    """The token scanner: reads the array from inside it (``buf`` starts between records)."""
    pos = 0
    depth, rec_start, rec_line, want = 1, -1, base_line, _CHUNK

    def where(i: int) -> int:
        return base_line + buf.count(b"\n", 0, i)

    while True:
        m = _TOKENS.search(buf, pos)
        if m is None or (m.group() == b'"' and not eof):
            if eof:
                break
            more = stream.read(want)
            if not more:
                eof = True
                continue
            keep = rec_start if rec_start >= 0 else pos
            base_line += buf.count(b"\n", 0, keep)
            buf, pos = buf[keep:] + more, pos - keep
            rec_start = 0 if rec_start >= 0 else -1
            want = min(want * 2, 64 * _CHUNK) if m is not None else _CHUNK
            continue
        want = _CHUNK
        tok, pos = m.group(), m.end()
        if tok == b'"':
            break  # a string still open at the end of the file
        if depth == 1 and tok not in (b"{", b"]"):
            raise ParseError("record is not an object", filename=filename, record=number, line=where(m.start()))
        if tok[:1] == b'"':
            continue
        if depth == 1 and tok == b"{":
            rec_start, rec_line = m.start(), where(m.start())
        depth += 1 if tok in (b"{", b"[") else -1
        if depth == 0:
            return
        if depth == 1 and rec_start >= 0:
            try:
                item = loads(buf[rec_start:pos])
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ParseError(f"invalid JSON ({e})", filename=filename, record=number, line=rec_line) from None
            yield record_from_dict(item, number, filename=filename, line=rec_line)
            number += 1
            base_line += buf.count(b"\n", 0, pos)
            buf, pos, rec_start = buf[pos:], 0, -1
            sep = _SEPARATORS.match(buf)
            pos = sep.end() if sep else 0
            _check_object(buf, pos, number, base_line, filename)
    line = rec_line if rec_start >= 0 else where(len(buf))
    raise ParseError("truncated JSON: the file ends inside this record", filename=filename, record=number, line=line)


def _iter_jsonl(
    head: bytes, fileobj: IO[bytes], filename: str, broken: list[tuple[int, str]] | None = None
) -> Iterator[MastRecord]:
    number, line_no, buf, eof = 0, 0, head, False
    while not eof:
        chunk = fileobj.read(_CHUNK)
        eof = not chunk
        buf += chunk
        if not eof and b"\n" not in chunk:
            continue  # a long line still being read
        lines = buf.split(b"\n")
        buf = b"" if eof else lines.pop()
        for raw in lines:
            line_no += 1
            if not raw.strip():
                continue
            try:
                item = loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                why = f"invalid JSON line ({e})"
                if broken is None:
                    raise ParseError(why, filename=filename, record=number, line=line_no) from None
                broken.append((line_no, why))
                continue
            yield record_from_dict(item, number, filename=filename, line=line_no)
            number += 1


def annotation_values(value: object, number: int, filename: str) -> dict[str, int | None] | None:
    if value is None:
        return None
    if isinstance(value, str):  # some copies store the dict as a JSON string
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ParseError("mast_annotation is not a JSON object", filename=filename, record=number) from None
    if not isinstance(value, dict):
        raise ParseError("mast_annotation must be an object", filename=filename, record=number)
    out: dict[str, int | None] = {}
    for code, v in value.items():
        if v is None or (isinstance(v, float) and v != v):
            out[str(code)] = None
        elif (isinstance(v, bool | int | float | Decimal) and float(v) in (0.0, 1.0)) or (
            isinstance(v, str) and v.strip() in ("0", "1")
        ):
            out[str(code)] = int(v)
        else:
            raise ParseError(f"mast_annotation[{code!r}] = {v!r} is not 0, 1 or null", filename=filename, record=number)
    return out


def _text(value: object) -> str:
    return "" if value is None else str(value)


def record_from_dict(item: object, number: int, *, filename: str = "", line: int | None = None) -> MastRecord:
    if not isinstance(item, dict):
        raise ParseError(
            f"record is {type(item).__name__}, expected an object", filename=filename, record=number, line=line
        )
    trace = item.get("trace")
    key, index = "", None
    if isinstance(trace, dict):
        key, index = _text(trace.get("key")), trace.get("index")
        trajectory = trace.get("trajectory")
    else:
        trajectory = trace if trace is not None else item.get("trajectory")
    if isinstance(trajectory, list | dict):
        trajectory = json.dumps(trajectory, ensure_ascii=False, indent=2)
    if not isinstance(trajectory, str):
        raise ParseError(
            "record has no trace text ('trace' or 'trace.trajectory')", filename=filename, record=number, line=line
        )
    if isinstance(index, Decimal | float):
        index = int(index)
    annotations = item.get("annotations")
    if annotations is not None and not isinstance(annotations, list):
        raise ParseError("'annotations' must be a list", filename=filename, record=number, line=line)
    rnd = item.get("round")
    return MastRecord(
        number=number,
        mas_name=_text(item.get("mas_name")),
        llm_name=_text(item.get("llm_name")),
        benchmark_name=_text(item.get("benchmark_name")),
        trace_id=_text(item.get("trace_id")),
        key=key,
        index=index if isinstance(index, str | int) or index is None else str(index),
        trajectory=trajectory,
        mast_annotation=annotation_values(item.get("mast_annotation"), number, filename),
        round=rnd if isinstance(rnd, str | int) or rnd is None else str(rnd),
        annotations=annotations,
        studio=_studio(item.get("mast_studio")),
    )


def _studio(value: object) -> dict | None:
    """A release record's ``mast_studio`` (an object, or its JSON text in Parquet); None when absent."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def parse_mast_record(rec: MastRecord) -> ParsedTrace:
    """Parse the record's native trajectory and fill the MAST metadata.

    The human-labelled file has ``mas_name`` "GAIA" with the framework in ``benchmark_name``
    (swapped); when only the benchmark names a framework, the two are swapped back.
    """
    mas = normalise_mas_name(rec.mas_name)
    benchmark = rec.benchmark_name
    swapped = False
    if not mas and normalise_mas_name(rec.benchmark_name):
        mas, benchmark, swapped = normalise_mas_name(rec.benchmark_name), rec.mas_name, True
    text = rec.trajectory
    fmt = "auto"
    if looks_json(text):  # MAST's own JSON shapes only (detect_json's mast_native)
        fmt = detect_json(text.lstrip("\ufeff \t\r\n")[:HEAD], mas_name=mas, mast_native=True)
    try:
        trace = parse_embedded(text, format=fmt, mas_name=mas)
    except ParseError as e:
        raise ParseError(e.reason, filename=e.filename, record=rec.number, line=e.line) from None
    trace.mas_name = mas or trace.mas_name
    trace.llm_name = rec.llm_name
    trace.benchmark = benchmark
    trace.external_id = rec.trace_id
    trace.metadata.update({"mad_key": rec.key, "mad_index": rec.index, "mad_record": rec.number})
    if swapped:
        trace.metadata["mad_names_swapped"] = {"mas_name": rec.mas_name, "benchmark_name": rec.benchmark_name}
    if rec.round is not None:
        trace.metadata["round"] = rec.round
    return trace
