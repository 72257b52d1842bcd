"""AdaMAST canonical JSONL (the MAST authors' newer tool): one trace per record.

AdaMAST reads (``adamast/core/trace_formats.py``) records ``{"trace_id" | "problem_id" | "id",
"task" | "prompt", "messages": [{role, name?, content, tool_calls?}] | "trajectory": [...] |
"raw_trajectory": "...", "outcome": {"status", "score"}, "metadata"}`` and writes the canonical
``{"problem_id", "task", "raw_trajectory", "metadata"}``. Both import here, one trace per record:
a message list gives one step per message (content parts as text, images named, tool calls
kept); ``outcome.status`` (success / failure and their synonyms) becomes the trace's outcome and
the whole outcome is kept in the metadata with the record's ``metadata``.

A canonical record is ``{"problem_id", "task", "raw_trajectory", "metadata"}``. ``raw_trajectory`` is the
system's own trace: a string in any text or JSON format this package reads (detected, with
``metadata``'s framework name breaking ties) or the JSON itself (a list of messages, a TaskResult,
...). ``metadata`` names the framework (``mas_name`` / ``framework`` / ``mas``), the model
(``llm_name`` / ``model``), the benchmark (``benchmark_name`` / ``benchmark`` / ``dataset``) and may
carry MAST labels as ``mast_annotation`` (``{"1.1": 0|1|null}``), which are stored as the
"MAST-Data judge" rater's, like MAST-Data's. The file may also be a JSON array of records.
``problem_id`` is the trace's own id. A ``raw_trajectory`` that no other format reads but that is
written as role-labelled turns (``user: ...``, ``[ASSISTANT]``, AdaMAST's own rendering) gives one
step per turn (``turns.split_turns``), not one step for the whole text.
"""

from __future__ import annotations

import json
import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.detect import normalise_mas_name
from traces.parsers.embedded import parse_embedded
from traces.parsers.mast import annotation_values
from traces.parsers.messages import to_messages
from traces.parsers.render import render
from traces.parsers.shapes import as_dict, rows_of, text
from traces.parsers.turns import split_turns

LABEL = "AdaMAST JSONL"
# a record of AdaMAST's input shape: an id key, and the messages (or trajectory list) with an
# outcome or a task beside them
_ID = re.compile(r'"(?:trace_id|problem_id)"\s*:')
_MESSAGES = re.compile(r'"(?:messages|trajectory)"\s*:\s*\[')
_BESIDE = re.compile(r'"(?:outcome|task)"\s*:')
OUTCOMES = {
    "success": "success",
    "succeeded": "success",
    "pass": "success",
    "passed": "success",
    "resolved": "success",
    "solved": "success",
    "correct": "success",
    "true": "success",
    "failure": "failure",
    "failed": "failure",
    "fail": "failure",
    "error": "failure",
    "unresolved": "failure",
    "incorrect": "failure",
    "false": "failure",
}


def sniff(head: str) -> bool:
    return '"raw_trajectory"' in head or bool(_ID.search(head) and _MESSAGES.search(head) and _BESIDE.search(head))


def _outcome(value: object) -> str:
    """success / failure from ``outcome`` (``{"status": ...}``, a bare status or a boolean); "" otherwise."""
    if isinstance(value, dict):
        value = value.get("status", value.get("success", value.get("result")))
    if isinstance(value, bool):
        return "success" if value else "failure"
    return OUTCOMES.get(str(value).strip().lower(), "") if isinstance(value, str) else ""


def _from_messages(items: list, n: int, filename: str) -> ParsedTrace:
    try:
        messages = to_messages(items, filename=filename)
    except ParseError as e:
        raise ParseError(f"read as {LABEL}: {e.reason}", filename=filename, record=n) from None
    if not messages:
        raise ParseError(f"read as {LABEL}: record has an empty message list", filename=filename, record=n)
    raw, steps = render(messages)
    return ParsedTrace(format="messages_json", raw_text=raw, steps=steps, metadata={"source_format": "json"})


def _first(meta: dict, *keys: str) -> str:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return ""


def _record(rec: dict, n: int, filename: str) -> ParsedTrace:
    meta = as_dict(rec.get("metadata"))
    mas = _first(meta, "mas_name", "framework", "mas", "system")
    items = rec.get("messages") if isinstance(rec.get("messages"), list) else None
    if items is None and isinstance(rec.get("trajectory"), list):
        items = rec["trajectory"]
    raw = rec.get("raw_trajectory")
    if raw is None and isinstance(rec.get("trajectory"), str):
        raw = rec["trajectory"]
    if items is not None:
        trace = _from_messages(items, n, filename)
    elif raw is None or raw == "" or raw == [] or raw == {}:
        raise ParseError(
            f"read as {LABEL}: record has no 'messages', 'trajectory' or 'raw_trajectory'", filename=filename, record=n
        )
    else:
        body = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, indent=1)
        try:
            # no file name: the trajectory is not a .jsonl file, whatever the file holding it is called
            trace = parse_embedded(body, mas_name=mas)
        except ParseError as e:
            raise ParseError(f"raw_trajectory: {e.reason}", filename=filename, record=n, line=e.line) from None
        if trace.format == "plaintext" and (turns := split_turns(trace.raw_text)) is not None:
            trace.steps, trace.format = turns, "turns"
    trace.mas_name = normalise_mas_name(mas) or mas or trace.mas_name
    trace.llm_name = _first(meta, "llm_name", "model", "model_name") or trace.llm_name
    trace.benchmark = _first(meta, "benchmark_name", "benchmark", "dataset") or trace.benchmark
    trace.task = text(rec.get("task")) or text(rec.get("prompt")) or trace.task
    trace.external_id = _first(rec, "problem_id", "trace_id", "id") or trace.external_id
    if rec.get("outcome") is not None:
        trace.metadata["adamast_outcome"] = rec["outcome"]
        trace.outcome = _outcome(rec["outcome"]) or trace.outcome
    trace.metadata["adamast_metadata"] = meta
    trace.metadata["adamast_record"] = n
    trace.metadata["inner_format"] = trace.format
    trace.format = "adamast"
    labels = meta.get("mast_annotation", rec.get("mast_annotation"))
    if labels is not None:
        trace.metadata["mast_annotation"] = annotation_values(labels, n, filename)
    return trace


def parse_adamast(obj: object, filename: str = "") -> list[ParsedTrace]:
    return [_record(rec, n, filename) for n, rec in enumerate(rows_of(obj, filename=filename, what=LABEL))]
