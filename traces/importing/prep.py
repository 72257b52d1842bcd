"""Preparing parsed traces for storage: statistics, content hash, text PostgreSQL can hold.

Pure (no Django import): the per-trace work of an import that is not parsing or writing.
"""

from __future__ import annotations

import hashlib
import json
import re
from operator import ne
from typing import Any

from traces.parsers import ParsedTrace, ParseError, parse_mast_record
from traces.parsers.mast import MastRecord

_IGNORED = b"0123456789 \t\n\r\x0b\x0c"
_SURROGATE = re.compile("[\ud800-\udfff]")


def trace_stats(parsed: ParsedTrace) -> dict[str, Any]:
    """Statistics stored on the Trace row (computed once, at import)."""
    steps = parsed.steps
    names = [st.agent for st in steps if st.agent]
    agents = list(dict.fromkeys(names))  # in order of first appearance
    text = parsed.raw_text
    return {
        "n_steps": len(steps),
        "n_agents": len(agents),
        "agents": agents,
        "n_agent_switches": sum(map(ne, names, names[1:])),  # steps without an agent do not count
        "n_chars": len(text),
        "n_lines": text.count("\n") + 1 if text else 0,
        "n_repeated_steps": repeated_steps([st.content for st in steps]),
    }


_CHUNK_CHARS = 4 * 1024**2


def repeated_steps(contents: list[str], *, chunk_chars: int = _CHUNK_CHARS) -> int:
    """How many steps repeat an earlier step's text once whitespace and digits (timestamps,
    counters, ids) are dropped; steps with nothing left do not count.

    In C passes over a few MB of steps at a time: the steps joined with NUL (which no step
    holds: the parsers replace it), encoded, stripped with one ``bytes.translate`` (a regex over
    200 MB of steps costs seconds), split again; a set of the stripped texts counts the repeats
    (it holds the distinct stripped steps of one trace, at most the trace's size)."""
    seen: set[bytes] = set()
    n = 0
    start = 0
    while start < len(contents):
        stop, size = start, 0
        while stop < len(contents) and (size < chunk_chars or stop == start):
            size += len(contents[stop])
            stop += 1
        chunk = contents[start:stop]
        start = stop
        parts = "\x00".join(chunk).encode("utf-8", "surrogatepass").translate(None, _IGNORED).split(b"\x00")
        if len(parts) != len(chunk):  # a step with NUL in it (not from the parsers): one at a time
            parts = [c.encode("utf-8", "surrogatepass").translate(None, _IGNORED) for c in chunk]
        kept = list(filter(None, parts))
        n += len(kept)
        seen.update(kept)
    return n - len(seen)


def make_storable(parsed: ParsedTrace) -> bytes:
    """PostgreSQL text holds valid UTF-8 only: lone surrogates (JSON escapes such as "\\ud800" in a
    record) become U+FFFD, counted in metadata["surrogates_replaced"], as the parsers do for NUL.
    Returns the trace text as UTF-8 (encoded once: the hash and the size come from it)."""
    try:
        data = parsed.raw_text.encode("utf-8")
        small = [parsed.task, parsed.mas_name, parsed.llm_name, parsed.benchmark, parsed.external_id]
        "".join([st.agent for st in parsed.steps]).encode("utf-8")  # raises on a lone surrogate, as above
        json.dumps([small, parsed.metadata], ensure_ascii=False, default=str).encode()
        return data
    except UnicodeEncodeError:
        pass

    def fix(text: str) -> str:
        return _SURROGATE.sub("\ufffd", text)

    count = len(_SURROGATE.findall(parsed.raw_text))
    parsed.raw_text = fix(parsed.raw_text)
    for attr in ("task", "mas_name", "llm_name", "benchmark", "external_id"):
        setattr(parsed, attr, fix(getattr(parsed, attr)))
    for st in parsed.steps:
        st.content, st.agent = fix(st.content), fix(st.agent)
    parsed.metadata = json.loads(fix(json.dumps(parsed.metadata, ensure_ascii=False, default=str)))
    parsed.metadata["surrogates_replaced"] = count
    return parsed.raw_text.encode("utf-8")


def clean_title(title: str) -> str:
    return _SURROGATE.sub("\ufffd", title)


def prepare(parsed: ParsedTrace) -> tuple[str, dict[str, Any]]:
    """Make the trace storable; return its content hash and statistics (``size_bytes`` included)."""
    data = make_storable(parsed)
    return hashlib.sha256(data).hexdigest(), {**trace_stats(parsed), "size_bytes": len(data)}


def mast_record_trace(rec: MastRecord, name: str) -> tuple[ParsedTrace, str, dict[str, Any]]:
    """Parse one MAST-Data record: (parsed trace, title, extra for import hooks). Raises ParseError."""
    try:
        parsed = parse_mast_record(rec)
    except ParseError as e:
        raise ParseError(e.reason, filename=name, record=rec.number if e.record is None else e.record, line=e.line)
    parsed.metadata["source_file"] = name
    title = " · ".join(x for x in (parsed.mas_name, parsed.benchmark, rec.trace_id or rec.key) if x)
    extra = {
        "source_file": name,
        "record_number": rec.number,
        "trace_id": rec.trace_id,
        "mas_name": rec.mas_name,
        "benchmark_name": rec.benchmark_name,
        "mast_annotation": rec.mast_annotation,
        "round": rec.round,
        "annotations": rec.annotations,
        "mast_studio": rec.studio,
    }
    return parsed, clean_title(title or f"record {rec.number}"), extra


_MODEL_TYPE = re.compile(r"ModelType\.(\w+)")


def chatdev_model(meta: dict[str, str]) -> str:
    """The model a ChatDev meta.txt names ("Model: GPT_4O", or a ``ModelType.GPT_4O`` anywhere), or ""."""
    for key in ("Model", "Model_Type", "Model Type", "ModelType", "LLM"):
        value = (meta.get(key) or "").strip()
        if value:
            m = _MODEL_TYPE.search(value)
            return m.group(1) if m else value.splitlines()[0].strip()
    for value in meta.values():
        if m := _MODEL_TYPE.search(value):
            return m.group(1)
    return ""
