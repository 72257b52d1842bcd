"""Helpers shared by the JSON agent-framework formats (Claude sessions, AutoGen, smolagents, ...).

Each of those modules turns its JSON into ``render.Message``s and calls :func:`build_trace`,
which renders them and refuses, naming the format and what was missing, a trace that would have
no content or (when the format names its agents) no named agent: such a file imports as
something that is not there, so it is refused instead (issue 17, "nothing silent").
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message, render

UNKNOWN = frozenset({"", "unknown", "none", "null"})


def as_dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list:
    return value if isinstance(value, list) else []


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def json_text(value: object) -> str:
    """Arguments and results that are not text, as compact readable JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def call_text(name: str, arguments: object) -> str:
    return f"call {name or '?'}({json_text(arguments)})"


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def usage_details(usage: object, *, model: object = None, timestamp: object = None, duration_ms: object = None) -> dict:
    """ParsedStep.details from a usage block of any of the usual spellings; only keys given."""
    u = as_dict(usage)
    out: dict = {}
    if isinstance(model, str) and model:
        out["model"] = model
    for key, names in (
        ("input_tokens", ("input_tokens", "prompt_tokens", "inputTokens", "promptTokens")),
        ("output_tokens", ("output_tokens", "completion_tokens", "outputTokens", "completionTokens")),
    ):
        for name in names:
            n = _int(u.get(name))
            if n is not None:
                out[key] = n
                break
    if isinstance(timestamp, str | int | float) and not isinstance(timestamp, bool) and timestamp != "":
        out["timestamp"] = str(timestamp)
    if isinstance(duration_ms, int | float) and not isinstance(duration_ms, bool):
        out["duration_ms"] = round(float(duration_ms), 3)
    return out


def rows_of(obj: object, *, filename: str, what: str) -> list[dict]:
    """The records of a JSON array / JSONL file, each an object (else refused, record named)."""
    rows = obj if isinstance(obj, list) else [obj]
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ParseError(f"{what}: record is {json_type(row)}, expected an object", filename=filename, record=n)
    return rows


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def build_trace(
    fmt: str,
    label: str,
    messages: Iterable[Message],
    *,
    filename: str = "",
    record: int | None = None,
    names_agents: bool = True,
    agent_keys: str = "",
    **fields: object,
) -> ParsedTrace:
    """Render messages into a trace of format ``fmt``; refuse an empty or nameless one.

    ``label`` names the format in messages ("AutoGen TaskResult"); ``agent_keys`` says where the
    format keeps agent names ("'source'"), for the message when none is found.
    """
    msgs = list(messages)
    if not msgs or not any(m.content.strip() for m in msgs):
        raise ParseError(f"read as {label}: no message has any content", filename=filename, record=record)
    if names_agents and all(m.agent.strip().lower() in UNKNOWN for m in msgs):
        where = f" ({agent_keys})" if agent_keys else ""
        raise ParseError(f"read as {label}: no message names its agent{where}", filename=filename, record=record)
    raw, steps = render(msgs)
    trace = ParsedTrace(format=fmt, raw_text=raw, steps=steps, metadata={"source_format": "json"})
    for key, value in fields.items():
        if key == "metadata":
            trace.metadata.update(as_dict(value))
        elif value is not None:
            setattr(trace, key, value if not isinstance(value, str) else value.strip())
    if not trace.llm_name:
        models = [s.details["model"] for s in steps if s.details.get("model")]
        if models:
            trace.llm_name = max(set(models), key=models.count)  # the model most steps name
    return trace
