"""Trace format parsers: pure Python, no Django.

``parse_trace(text)`` turns one native trace file into a ``ParsedTrace``: the raw text,
framework metadata and ordered ``ParsedStep``s (agent, kind, line range).

Decisions worth knowing:

* Lines are counted on ``"\\n"`` only (``"\\r\\n"`` is normalised to ``"\\n"``), 1-based.
* A step's ``content`` is exactly lines ``line_start..line_end`` of ``raw_text`` joined with
  ``"\\n"``, header line included (e.g. ``[2025-13-05 08:33:55 INFO] Programmer: ...``).
* Steps are ordered and never overlap; lines may belong to no step: preamble noise a format
  does not show, blank lines between steps, and known noise lines (ChatDev's ``flask app.py
  did not start for online log``).
* Text formats keep the text as given. JSON inputs (AG2/HyperAgent ``_human.json``, MetaGPT
  run JSON, Who&When, generic messages JSON/JSONL) get ``raw_text`` = a readable rendering,
  one block per message (``### <agent> (<role>)`` then the text) and
  ``metadata["source_format"] = "json"``; the importer stores ``raw_text`` as the trace text.
  HyperAgent's rendering is its trajectory lines joined, so line k is trajectory[k-1];
  Who&When step i is history[i], so ``mistake_step`` indexes steps.
* NUL characters (PostgreSQL text cannot hold them) become U+FFFD;
  ``metadata["nul_replaced"]`` counts them.
* Text in no known format is split at blank lines into steps of 8..200 lines (``plaintext``);
  a format parser that finds no step falls back to that, so non-empty text never has zero steps.
"""

from __future__ import annotations

from traces.parsers import appworld, chatdev, hyperagent, magentic_one, metagpt, openmanus
from traces.parsers.ag2 import parse_ag2, parse_whowhen
from traces.parsers.appworld import parse_appworld
from traces.parsers.base import STEP_KINDS, ParsedStep, ParsedTrace, ParseError, normalise_newlines
from traces.parsers.chatdev import parse_chatdev
from traces.parsers.detect import detect_format, looks_json, normalise_mas_name
from traces.parsers.hyperagent import parse_hyperagent, parse_hyperagent_text
from traces.parsers.magentic_one import parse_magentic_one
from traces.parsers.mast import MastRecord, is_mast_data, iter_mast_records, parse_mast_record
from traces.parsers.messages import load_json, load_jsonl, message_list, parse_messages
from traces.parsers.metagpt import parse_metagpt_json, parse_metagpt_log
from traces.parsers.openmanus import parse_openmanus
from traces.parsers.plaintext import parse_plaintext, split_blocks
from traces.parsers.registry import (
    TraceFormat,
    format_register,
    formats,
    register_span_formats,
    span_format,
    text_format,
)
from traces.parsers.spans import parse_spans

__all__ = [
    "FORMATS",
    "STEP_KINDS",
    "MastRecord",
    "ParseError",
    "ParsedStep",
    "ParsedTrace",
    "detect_format",
    "is_mast_data",
    "iter_mast_records",
    "normalise_mas_name",
    "parse_mast_record",
    "parse_trace",
]

# The formats, in the order detection prefers on a tie and the import form lists them. A new text
# format is one module (parse function + MARKERS) and one line here (see registry.py).
for _fmt in (
    TraceFormat("chatdev", parse=parse_chatdev, markers=chatdev.MARKERS, mas_name="ChatDev"),
    TraceFormat("metagpt_json", kind="json"),
    TraceFormat("metagpt_log", parse=parse_metagpt_log, markers=metagpt.MARKERS),
    TraceFormat("ag2", kind="json"),
    # HyperAgent writes text logs and _human.json files: a text format that also accepts JSON.
    TraceFormat("hyperagent", parse=parse_hyperagent_text, markers=hyperagent.MARKERS, mas_name="HyperAgent"),
    TraceFormat("appworld", parse=parse_appworld, markers=appworld.MARKERS, mas_name="AppWorld"),
    TraceFormat(
        "magentic_one",
        parse=parse_magentic_one,
        markers=magentic_one.MARKERS,
        mas_name="Magentic-One",
        filename_suffixes=("console_log.txt",),
    ),
    TraceFormat("openmanus", parse=parse_openmanus, markers=openmanus.MARKERS, mas_name="OpenManus"),
    TraceFormat("messages_json", kind="json"),
    TraceFormat("plaintext", parse=parse_plaintext),
    TraceFormat("whowhen", kind="json"),
):
    format_register(_fmt)
register_span_formats()

FORMATS: tuple[str, ...] = tuple(f.name for f in formats())
_JSON_FORMATS = frozenset({f.name for f in formats() if f.kind == "json"} | {"hyperagent"})


def parse_trace(text: str, *, format: str = "auto", filename: str = "", mas_name: str = "") -> ParsedTrace:
    """Parse one native trace file (already decoded). Raises ParseError on bad input."""
    if not text or not text.strip():
        raise ParseError("empty trace", filename=filename)
    text = normalise_newlines(text)
    if is_mast_data(text[:8192].encode("utf-8", "replace")):
        raise ParseError("this is a MAST-Data file of many traces: read it with iter_mast_records", filename=filename)
    if format == "auto":
        format = detect_format(text, filename=filename, mas_name=mas_name)
    elif format not in (names := [f.name for f in formats()]):
        raise ParseError(f"unknown format {format!r}; expected one of {', '.join(names)} or auto", filename=filename)
    if span_format(format) is not None:
        return _strip_nul(parse_spans(text.lstrip("\ufeff"), format=format, filename=filename))
    if format in _JSON_FORMATS and looks_json(text):
        trace = _parse_json(text.lstrip("\ufeff"), format, filename=filename, mas_name=mas_name)
    elif (text_fmt := text_format(format)) is not None:
        trace = text_fmt.parse(text)
    else:
        raise ParseError(f"format {format} expects JSON", filename=filename, line=1)
    if format != "plaintext" and all(s.kind == "log" and not s.agent for s in trace.steps):
        # no header of the format matched: split into readable blocks, never one giant step
        trace.steps = split_blocks(trace.raw_text)
        trace.metadata["fallback"] = "plaintext"
    if not trace.steps:
        raise ParseError("trace has no content", filename=filename)
    return _strip_nul(trace)


def _parse_json(text: str, format: str, *, filename: str, mas_name: str) -> ParsedTrace:
    stripped = text.lstrip()
    if stripped.startswith("{") and _looks_jsonl(stripped):
        obj: object = load_jsonl(text, filename=filename)
    else:
        obj = load_json(text, filename=filename)
    # the JSON shape settles what the 64 KB head could not
    if isinstance(obj, dict):
        traj = obj.get("trajectory")
        if isinstance(traj, list) and traj and format in ("ag2", "hyperagent"):
            format = "hyperagent" if all(isinstance(x, str) for x in traj) else "ag2"
        elif isinstance(obj.get("history"), list) and format in ("messages_json", "ag2"):
            format = "whowhen"
        elif isinstance(obj.get("content"), str) and "run_id" in obj:
            format = "metagpt_json"
    if format == "metagpt_json":
        return parse_metagpt_json(text, filename=filename, obj=obj)
    if format == "hyperagent":
        return parse_hyperagent(text, filename=filename, obj=obj)
    if format == "whowhen":
        return parse_whowhen(text, filename=filename, obj=obj)
    if format == "ag2":
        return parse_ag2(text, filename=filename, obj=obj)
    if message_list(obj) is None:
        raise ParseError("JSON is not a list of messages", filename=filename)
    trace = parse_messages(text, filename=filename, obj=obj)
    if normalise_mas_name(mas_name):
        trace.mas_name = normalise_mas_name(mas_name)
    return trace


def _looks_jsonl(text: str) -> bool:
    first, _, rest = text.partition("\n")
    return first.rstrip().endswith("}") and rest.lstrip().startswith("{")


def _strip_nul(trace: ParsedTrace) -> ParsedTrace:
    count = trace.raw_text.count("\x00")
    if count:
        trace.raw_text = trace.raw_text.replace("\x00", "\ufffd")
        for st in trace.steps:
            st.content = st.content.replace("\x00", "\ufffd")
        trace.metadata["nul_replaced"] = count
    if "\x00" in trace.task:
        trace.task = trace.task.replace("\x00", "\ufffd")
    return trace
