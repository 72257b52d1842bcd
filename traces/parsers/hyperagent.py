"""HyperAgent: MAST ``_human.json`` whose ``trajectory`` is a flat list of log lines.

The rendered text is the trajectory joined with newlines, so line k is trajectory[k-1].
A step starts at each ``HyperAgent_<id> - INFO - `` line; other lines continue it.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, ParseError, segment
from traces.parsers.detect import looks_json
from traces.parsers.messages import load_json
from traces.parsers.render import text_of

HEADER = re.compile(r"^HyperAgent_\S+ - [A-Z]+ - (.*)$", re.M)
_INNER = re.compile(r"Inner-(\w+)-Assistant's Response:")
_TO_PLANNER = re.compile(r"(\w+)->Planner:")
_ACTION = re.compile(r"^Action:", re.M)


def _classify(m: re.Match[str]) -> tuple[str, str]:
    msg = m.group(1)
    if msg.startswith("Planner's Response:"):
        return "Planner", "message"
    inner = _INNER.match(msg)
    if inner:
        return inner.group(1), "tool_call"  # demoted to message below when it runs no action
    to_planner = _TO_PLANNER.match(msg)
    if to_planner:
        return to_planner.group(1), "message"
    if msg.startswith("Initialized"):
        return "", "system"
    return "", "log"


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (re.compile(r"^HyperAgent_\S+ - [A-Z]+ - ", re.M),)


def parse_hyperagent_text(text: str) -> ParsedTrace:
    steps = segment(text, HEADER, _classify, merge_kinds=frozenset({"log", "system"}))
    for st in steps:
        if st.kind == "tool_call" and not _ACTION.search(st.content):
            st.kind = "message"
    return ParsedTrace(format="hyperagent", raw_text=text, steps=steps, mas_name="HyperAgent")


def parse_hyperagent(text: str, *, filename: str = "", obj: object = None) -> ParsedTrace:
    if obj is None and not looks_json(text):
        return parse_hyperagent_text(text)
    obj = load_json(text, filename=filename) if obj is None else obj
    lines = obj.get("trajectory") if isinstance(obj, dict) else obj
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise ParseError("HyperAgent trace needs 'trajectory' as a list of log lines", filename=filename)
    trace = parse_hyperagent_text("\n".join(lines))
    trace.metadata["source_format"] = "json"
    if isinstance(obj, dict):
        trace.task = text_of(obj.get("problem_statement") or "")
        trace.external_id = str(obj.get("instance_id") or "")
        if isinstance(obj.get("note"), dict | str):
            trace.metadata["note"] = obj["note"]
    return trace
