"""AG2 / AutoGen: MAST ``_human.json`` (content as a list of lines), bare message lists,
and Who&When records (``history``; AG2 CaptainAgent or Magentic-One)."""

from __future__ import annotations

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.messages import load_json, message_list, to_messages
from traces.parsers.render import render, text_of


def _truthy(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def parse_ag2(text: str, *, filename: str = "", obj: object = None) -> ParsedTrace:
    obj = load_json(text, filename=filename) if obj is None else obj
    items = message_list(obj)
    if items is None:
        raise ParseError("AG2 trace needs a list of turns or a 'trajectory' list", filename=filename)
    raw, steps = render(to_messages(items, filename=filename))
    trace = ParsedTrace(format="ag2", raw_text=raw, steps=steps, mas_name="AG2", metadata={"source_format": "json"})
    if isinstance(obj, dict):
        trace.task = text_of(obj.get("problem_statement") or obj.get("question") or "")
        trace.external_id = str(obj.get("instance_id") or "")
        other = obj.get("other_data")
        if isinstance(other, dict):
            correct = _truthy(other.get("correct"))
            if correct is not None:
                trace.outcome = "success" if correct else "failure"
        if isinstance(obj.get("note"), dict | str):
            trace.metadata["note"] = obj["note"]
    return trace


_WHOWHEN_KEYS = ("mistake_agent", "mistake_step", "mistake_reason", "ground_truth", "level", "is_corrected")


def parse_whowhen(text: str, *, filename: str = "", obj: object = None) -> ParsedTrace:
    """Who&When (ICML 2025): step i is history[i], so ``mistake_step`` indexes steps directly."""
    obj = load_json(text, filename=filename) if obj is None else obj
    if not isinstance(obj, dict) or not isinstance(obj.get("history"), list):
        raise ParseError("Who&When record needs a 'history' list", filename=filename)
    history = obj["history"]
    raw, steps = render(to_messages(history, filename=filename))
    named = any(isinstance(h, dict) and h.get("name") for h in history)
    meta: dict = {"source_format": "json"}
    for key in _WHOWHEN_KEYS:
        if key in obj:
            meta[key] = obj[key]
    correct = _truthy(obj.get("is_correct"))
    if correct is not None:
        outcome = "success" if correct else "failure"
    else:
        outcome = "failure" if obj.get("mistake_agent") else ""
    return ParsedTrace(
        format="whowhen",
        raw_text=raw,
        steps=steps,
        mas_name="AG2" if named else "Magentic-One",
        task=text_of(obj.get("question") or ""),
        external_id=str(obj.get("question_ID") or ""),
        outcome=outcome,
        metadata=meta,
    )
