"""ChatDev ``.log``: a step starts at ``[<timestamp> <LEVEL>] ``; following lines belong to it.

``<Agent Name>: `` after the prefix names the speaker; ``System:``, ``HTTP Request:`` and
``**[...]**`` lines are system/log steps, not agents. The ``flask app.py did not start for
online log`` line printed after every entry belongs to no step. Timestamps are not parsed
(real logs swap day and month: ``2025-13-05``).
"""

from __future__ import annotations

import re

from traces.parsers.base import SKIP, ParsedTrace, segment

HEADER = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+\] (.*)$", re.M)
_SPEAKER = re.compile(r"([A-Z][\w.' -]{0,60}?): ")
_BRACKET = re.compile(r"\*\*\[([^\]]+)\]\*\*")
_TASK = re.compile(r"^\*\*task_prompt\*\*: (.*)$", re.M)
_PROJECT = re.compile(r"^\*\*project_name\*\*: (.*)$", re.M)
_MODEL = re.compile(r"\*\*model_type\*\* \| ModelType\.(\w+)")
_BRACKET_KINDS = {"OpenAI_Usage_Info Receive": "log", "Test Reports": "tool_output"}


def _classify(m: re.Match[str]) -> tuple[str, str]:
    msg = m.group(1)
    if msg.startswith("flask app.py did not start"):
        return SKIP
    if msg.startswith("HTTP Request:"):
        return "", "log"
    bracket = _BRACKET.match(msg)
    if bracket:
        return "", _BRACKET_KINDS.get(bracket.group(1), "system")
    speaker = _SPEAKER.match(msg)
    if speaker:
        name = speaker.group(1)
        return ("", "system") if name == "System" else (name, "message")
    return "", "log"


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+\] ", re.M),)


def parse_chatdev(text: str) -> ParsedTrace:
    steps = segment(text, HEADER, _classify)
    trace = ParsedTrace(format="chatdev", raw_text=text, steps=steps, mas_name="ChatDev")
    head = text[:65536]
    if m := _TASK.search(head):
        trace.task = m.group(1).strip()
    if m := _PROJECT.search(head):
        trace.metadata["project_name"] = m.group(1).strip()
    if m := _MODEL.search(head):
        trace.metadata["model_type"] = m.group(1)
        trace.llm_name = m.group(1)  # ModelType.GPT_4O: the model ChatDev ran with
    return trace
