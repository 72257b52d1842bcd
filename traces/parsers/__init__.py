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
* A ``.json`` / ``.jsonl`` file must be JSON (unless ``format="plaintext"`` is asked for): one
  that does not decode is refused with its line and column, never stored as a text trace. JSON
  whose records are not objects (``[null, 3, "x"]``) is refused with the record named.
* ``parse_traces`` returns every trace of a file (AdaMAST and Docent files hold one per record);
  ``parse_trace`` is for files of one trace.
"""

from __future__ import annotations

from traces.parsers import (
    adamast,
    appworld,
    autogen,
    chatdev,
    claude,
    docent,
    hyperagent,
    langchain,
    magentic_one,
    metagpt,
    openmanus,
    smolagents,
)
from traces.parsers.ag2 import parse_ag2, parse_whowhen
from traces.parsers.appworld import parse_appworld
from traces.parsers.base import STEP_KINDS, ParsedStep, ParsedTrace, ParseError, normalise_newlines
from traces.parsers.chatdev import parse_chatdev
from traces.parsers.detect import HEAD, detect_format, detect_json, looks_json, normalise_mas_name
from traces.parsers.embedded import embedded_reader_set
from traces.parsers.hyperagent import parse_hyperagent, parse_hyperagent_text
from traces.parsers.jsonload import JSONDecodeError, loads
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
    json_format,
    register_span_formats,
    span_format,
    text_format,
)
from traces.parsers.shapes import json_type
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
    "parse_traces",
]

# The formats, in the order detection prefers on a tie and the import form lists them. A new text
# format is one module (parse function + MARKERS) and one line here (see registry.py).
for _fmt in (
    TraceFormat("chatdev", parse=parse_chatdev, markers=chatdev.MARKERS, mas_name="ChatDev", label="ChatDev log"),
    TraceFormat("metagpt_json", kind="json", label="MetaGPT run JSON"),
    TraceFormat("metagpt_log", parse=parse_metagpt_log, markers=metagpt.MARKERS, label="MetaGPT log"),
    TraceFormat("ag2", kind="json", label="AG2 _human.json / messages"),
    # HyperAgent writes text logs and _human.json files: a text format that also accepts JSON.
    TraceFormat(
        "hyperagent", parse=parse_hyperagent_text, markers=hyperagent.MARKERS, mas_name="HyperAgent", label="HyperAgent"
    ),
    TraceFormat("appworld", parse=parse_appworld, markers=appworld.MARKERS, mas_name="AppWorld", label="AppWorld log"),
    TraceFormat(
        "magentic_one",
        parse=parse_magentic_one,
        markers=magentic_one.MARKERS,
        mas_name="Magentic-One",
        filename_suffixes=("console_log.txt",),
        label="Magentic-One console log",
    ),
    TraceFormat(
        "openmanus", parse=parse_openmanus, markers=openmanus.MARKERS, mas_name="OpenManus", label="OpenManus log"
    ),
    # JSON formats with their own sniffer and parser (registry.py says how to add one). Formats whose
    # records hold another format's JSON (AdaMAST, Docent) come first: their keys settle it.
    TraceFormat("adamast", kind="json", sniff=adamast.sniff, parse_obj=adamast.parse_adamast, label=adamast.LABEL),
    TraceFormat("docent", kind="json", sniff=docent.sniff, parse_obj=docent.parse_docent, label=docent.LABEL),
    TraceFormat("claude", kind="json", sniff=claude.sniff, parse_obj=claude.parse_claude, label=claude.LABEL),
    TraceFormat("autogen", kind="json", sniff=autogen.sniff, parse_obj=autogen.parse_autogen, label=autogen.LABEL),
    TraceFormat(
        "smolagents_run",
        kind="json",
        sniff=smolagents.sniff_run,
        parse_obj=smolagents.parse_smolagents_run,
        label=smolagents.RUN_LABEL,
    ),
    TraceFormat(
        "smolagents", kind="json", sniff=smolagents.sniff, parse_obj=smolagents.parse_smolagents, label=smolagents.LABEL
    ),
    TraceFormat(
        "langchain", kind="json", sniff=langchain.sniff, parse_obj=langchain.parse_langchain, label=langchain.LABEL
    ),
    TraceFormat("messages_json", kind="json", label="chat messages JSON / JSONL"),
    TraceFormat("plaintext", parse=parse_plaintext, label="plain text"),
    TraceFormat("whowhen", kind="json", label="Who&When JSON"),
):
    format_register(_fmt)
register_span_formats()

FORMATS: tuple[str, ...] = tuple(f.name for f in formats())
_JSON_FORMATS = frozenset({f.name for f in formats() if f.kind == "json"} | {"hyperagent"})


def parse_trace(text: str, *, format: str = "auto", filename: str = "", mas_name: str = "") -> ParsedTrace:
    """Parse one native trace file (already decoded). Raises ParseError on bad input."""
    traces = parse_traces(text, format=format, filename=filename, mas_name=mas_name)
    if len(traces) != 1:
        raise ParseError(f"the file holds {len(traces)} traces: read it with parse_traces", filename=filename)
    return traces[0]


def _json_named(filename: str) -> bool:
    return filename.lower().rsplit(":", 1)[-1].endswith((".json", ".jsonl"))


def parse_traces(
    text: str,
    *,
    format: str = "auto",
    filename: str = "",
    mas_name: str = "",
    broken: list[tuple[int, str]] | None = None,
) -> list[ParsedTrace]:
    """Every trace of one file (already decoded), in file order. Raises ParseError on bad input.

    ``broken`` ("import the rest"): a JSONL line that is not JSON is skipped and listed there as
    (line number, why) instead of refusing the file; a file whose every line is broken is refused."""
    if not text or not text.strip():
        raise ParseError("empty trace", filename=filename)
    text = normalise_newlines(text)
    if is_mast_data(text[:8192].encode("utf-8", "replace")):
        raise ParseError("this is a MAST-Data file of many traces: read it with iter_mast_records", filename=filename)
    if format not in ("auto", *(names := [f.name for f in formats()])):
        raise ParseError(f"unknown format {format!r}; expected one of {', '.join(names)} or auto", filename=filename)
    obj: object = _NOT_DECODED
    if format != "plaintext" and (_json_named(filename) or json_format(format) is not None):
        obj = _decode(text.lstrip("\ufeff"), filename, broken)  # a .json file must be JSON: refused, line named
        if format == "auto":
            format = detect_json(text.lstrip("\ufeff \t\r\n")[:HEAD], filename=filename, mas_name=mas_name)
    elif format == "auto":
        format = detect_format(text, filename=filename, mas_name=mas_name)
    if span_format(format) is not None:
        return [_strip_nul(parse_spans(text.lstrip("\ufeff"), format=format, filename=filename))]
    if (fmt := json_format(format)) is not None:
        if obj is _NOT_DECODED:
            obj = _decode(text.lstrip("\ufeff"), filename, broken)
        result = fmt.parse_obj(obj, filename)
        traces = result if isinstance(result, list) else [result]
        if not traces:
            raise ParseError(f"read as {fmt.title}: the file holds no record", filename=filename)
        return [_strip_nul(t) for t in traces]
    if obj is not _NOT_DECODED:
        _check_records(obj, filename)
    if format in _JSON_FORMATS and (obj is not _NOT_DECODED or looks_json(text)):
        rest = broken is not None
        trace = _parse_json(text.lstrip("\ufeff"), format, filename=filename, mas_name=mas_name, rest=rest)
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
    return [_strip_nul(trace)]


_NOT_DECODED = object()


def _decode(text: str, filename: str, broken: list[tuple[int, str]] | None = None) -> object:
    """The JSON of a file: one document, or JSONL (a list of its lines' objects); with ``broken``,
    JSONL lines that are not JSON objects are listed there and skipped."""
    stripped = text.lstrip()
    if stripped.startswith("{") and _looks_jsonl(stripped):
        rows = []
        for n, raw in enumerate(text.split("\n"), start=1):
            if not raw.strip():
                continue
            try:
                row = loads(raw)
            except JSONDecodeError as e:
                why = f"invalid JSON: {e.msg} (column {e.colno})"
                if broken is None:
                    raise ParseError(why, filename=filename, line=n) from None
                broken.append((n, why))
                continue
            if not isinstance(row, dict):
                why = f"JSONL line is {json_type(row)}, expected an object"
                if broken is None:
                    raise ParseError(why, filename=filename, line=n)
                broken.append((n, why))
                continue
            rows.append(row)
        if not rows and broken:
            line, why = broken[0]
            raise ParseError(f"every line is broken ({len(broken)}); the first: {why}", filename=filename, line=line)
        return rows
    try:
        return loads(text)
    except JSONDecodeError as e:
        raise ParseError(f"invalid JSON: {e.msg} (column {e.colno})", filename=filename, line=e.lineno) from None


def _check_records(obj: object, filename: str) -> None:
    """JSON the older shapes read: an object, or a list of objects (the record named if not)."""
    if isinstance(obj, list):
        for n, item in enumerate(obj):
            if not isinstance(item, dict):
                raise ParseError(f"record is {json_type(item)}, expected an object", filename=filename, record=n)
    elif not isinstance(obj, dict):
        raise ParseError(f"the JSON is {json_type(obj)}, expected an object or a list of objects", filename=filename)


def _parse_json(text: str, format: str, *, filename: str, mas_name: str, rest: bool = False) -> ParsedTrace:
    stripped = text.lstrip()
    if stripped.startswith("{") and _looks_jsonl(stripped):
        # with ``rest``, _decode listed the broken lines already
        obj: object = load_jsonl(text, filename=filename, broken=[] if rest else None)
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
    """JSON Lines: a first line that is a whole object, and more lines (whatever they hold: a
    broken one is named as a broken line, not as the file failing to be one document)."""
    first, _, rest = text.partition("\n")
    return first.rstrip().endswith("}") and bool(rest.strip())


def _strip_nul(trace: ParsedTrace) -> ParsedTrace:
    # "in" first: one memchr, where count walks every character of a text that seldom has any
    count = trace.raw_text.count("\x00") if "\x00" in trace.raw_text else 0
    if count:
        trace.raw_text = trace.raw_text.replace("\x00", "\ufffd")
        for st in trace.steps:
            st.content = st.content.replace("\x00", "\ufffd")
        trace.metadata["nul_replaced"] = count
    if "\x00" in trace.task:
        trace.task = trace.task.replace("\x00", "\ufffd")
    return trace


embedded_reader_set(parse_trace)  # MAST-Data and AdaMAST records parse their trajectories with it
