"""AutoGen / AG2 0.4+ ``TaskResult`` (and team state dumps): ``{"messages": [...], "stop_reason"}``.

Each message has ``source`` (the agent), ``type`` and ``content``; ``models_usage``
(``prompt_tokens``, ``completion_tokens``) when a model produced it; ``created_at`` in newer
versions. Types: ``TextMessage``, ``MultiModalMessage``, ``ToolCallRequestEvent`` (content: a list
of ``{id, name, arguments}``), ``ToolCallExecutionEvent`` (a list of ``{call_id, name, content,
is_error}``), ``ToolCallSummaryMessage``, ``HandoffMessage`` (``target``), ``StopMessage``,
``ThoughtEvent``, ``SelectSpeakerEvent``, ``MemoryQueryEvent`` and others (kept as messages with
their type as role). A bare list of such messages is read the same way.

The agent is ``source``; a file where no message has one is refused (every agent would be
"unknown"). ``ModelClientStreamingChunkEvent`` pieces are dropped: the full message follows them.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message, text_of
from traces.parsers.shapes import as_dict, as_list, build_trace, call_text, json_text, text, usage_details

LABEL = "AutoGen TaskResult"
_TYPES = (
    "TextMessage|MultiModalMessage|ToolCallRequestEvent|ToolCallExecutionEvent|ToolCallSummaryMessage|"
    "HandoffMessage|StopMessage|ThoughtEvent|SelectSpeakerEvent|StructuredMessage|UserInputRequestedEvent"
)
SNIFF = re.compile(rf'"models_usage"|"type"\s*:\s*"(?:{_TYPES})"')
_SYSTEM = {"StopMessage", "SelectSpeakerEvent", "UserInputRequestedEvent", "MemoryQueryEvent"}


def sniff(head: str) -> bool:
    return SNIFF.search(head) is not None


def _message(item: dict) -> Message | None:
    mtype = text(item.get("type"))
    agent = text(item.get("source"))
    content = item.get("content")
    details = usage_details(item.get("models_usage"), timestamp=item.get("created_at"))
    if mtype == "ModelClientStreamingChunkEvent":
        return None
    if mtype == "ToolCallRequestEvent":
        calls = [as_dict(c) for c in as_list(content)]
        body = "\n".join(call_text(text(c.get("name")), c.get("arguments")) for c in calls) or json_text(content)
        return Message(agent, "tool_call", body, "", details)
    if mtype == "ToolCallExecutionEvent":
        parts = []
        names = []
        for r in (as_dict(c) for c in as_list(content)):
            name = text(r.get("name"))
            names.append(name)
            head = f"[{name or 'tool'}{' error' if r.get('is_error') else ''}]"
            parts.append(f"{head} {text_of(r.get('content'))}")
        role = "tool result: " + ", ".join(n for n in names if n) if any(names) else "tool result"
        return Message(agent, "tool_output", "\n".join(parts) or json_text(content), role, details)
    if mtype == "HandoffMessage":
        target = text(item.get("target"))
        role = f"handoff -> {target}" if target else "handoff"
        return Message(agent, "message", text_of(content), role, details, recipient=target)
    if mtype == "ToolCallSummaryMessage":
        return Message(agent, "tool_output", text_of(content), "tool summary", details)
    if mtype == "ThoughtEvent":
        return Message(agent, "message", text_of(content), "thought", details)
    kind = "system" if mtype in _SYSTEM else "message"
    role = "" if mtype in ("TextMessage", "") else mtype
    if mtype == "MultiModalMessage":
        body = "\n".join(x if isinstance(x, str) else "[image]" for x in as_list(content))
        return Message(agent, kind, body, "", details)
    return Message(agent, kind, text_of(content), role, details)


def parse_autogen(obj: object, filename: str = "") -> ParsedTrace:
    if isinstance(obj, dict):
        items = obj.get("messages")
        if not isinstance(items, list):
            raise ParseError(f"read as {LABEL}: no 'messages' list", filename=filename)
    elif isinstance(obj, list):
        items = obj
    else:
        raise ParseError(f"read as {LABEL}: expected an object with 'messages' or a list", filename=filename)
    msgs = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise ParseError(f"read as {LABEL}: message {n + 1} is not an object", filename=filename, record=n)
        m = _message(item)
        if m is not None:
            msgs.append(m)
    meta: dict = {}
    task = ""
    if isinstance(obj, dict) and obj.get("stop_reason") is not None:
        meta["stop_reason"] = obj["stop_reason"]
    first = next((m for m in msgs if m.agent == "user" and m.content.strip()), None)
    if first is not None:
        task = first.content
    return build_trace(
        "autogen", LABEL, msgs, filename=filename, agent_keys="'source'", mas_name="AG2", task=task, metadata=meta
    )
