"""LangGraph / LangChain message lists, in every spelling they are saved in.

* ``message.model_dump()`` / ``dict(message)``: ``{"type": "human"|"ai"|"tool"|"system", "content",
  "name", "tool_calls": [{"name", "args", "id"}], "tool_call_id", "usage_metadata",
  "response_metadata": {"model_name", "token_usage"}, "additional_kwargs"}``;
* ``messages_to_dict``: ``{"type": "ai", "data": {...the same...}}``;
* ``dumpd``: ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``;
* OpenAI-style ``{"role": "user"|"assistant"|"tool", "content", "name", "tool_calls"}``.

A LangGraph state (``{"messages": [...], ...}``) is read for its messages; its other keys are
kept as metadata. So are a thread's saved states (``_state_of``): a ``get_state()`` snapshot or
the LangGraph API's thread state (``{"values": {"messages"}, "next", "checkpoint" | "config",
"metadata", "created_at", "tasks"}``), the snapshot JSON-dumped as a tuple (``[values, next,
config, metadata, created_at, ...]``), a checkpointer's checkpoint (``{"channel_values":
{"messages"}, ...}``) and a state history (``get_state_history()``, a list of those): the
history's latest state holds every message (``add_messages`` appends), so it is the trace, and
the number of checkpoints is kept. Agents: a message's ``name`` (LangGraph multi-agent graphs name each agent's AI
messages, e.g. ``research_expert``), else "user" for human messages and "assistant" for AI ones.
A tool message belongs to the agent whose tool call it answers (role ``tool result: <name>``).
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message, text_of
from traces.parsers.shapes import as_dict, as_list, build_trace, call_text, json_text, text, usage_details

LABEL = "LangChain / LangGraph messages"
SNIFF = re.compile(
    r'"(?:additional_kwargs|response_metadata|usage_metadata|tool_call_id)"'
    r'|"type"\s*:\s*"(?:human|ai|tool|AIMessage|HumanMessage|ToolMessage|AIMessageChunk)"|"lc"\s*:\s*1'
)
_TYPES = {
    "human": "human", "humanmessage": "human", "user": "human",
    "ai": "ai", "aimessage": "ai", "aimessagechunk": "ai", "assistant": "ai",
    "tool": "tool", "toolmessage": "tool", "function": "tool", "functionmessage": "tool",
    "system": "system", "systemmessage": "system", "developer": "system",
}  # fmt: skip


def sniff(head: str) -> bool:
    return SNIFF.search(head) is not None


def _unwrap(item: dict) -> tuple[str, dict]:
    """(message type, fields) of any of the spellings."""
    if item.get("lc") == 1 and isinstance(item.get("kwargs"), dict):
        ident = as_list(item.get("id"))
        return _TYPES.get(str(ident[-1]).lower() if ident else "", ""), item["kwargs"]
    if isinstance(item.get("data"), dict) and "content" in item["data"]:
        return _TYPES.get(text(item.get("type")).lower(), ""), item["data"]
    kind = text(item.get("type")) or text(item.get("role"))
    return _TYPES.get(kind.lower(), ""), item


def _calls(fields: dict) -> list[tuple[str, str, object]]:
    """(id, name, arguments) of an AI message's tool calls (LangChain or OpenAI spelling)."""
    out = []
    calls = fields.get("tool_calls") or as_dict(fields.get("additional_kwargs")).get("tool_calls")
    for call in as_list(calls):
        c = as_dict(call)
        fn = as_dict(c.get("function"))
        name = text(c.get("name")) or text(fn.get("name"))
        args = c["args"] if "args" in c else fn.get("arguments", c.get("arguments"))
        out.append((text(c.get("id")), name, args))
    return out


def _details(fields: dict) -> dict:
    meta = as_dict(fields.get("response_metadata"))
    usage = fields.get("usage_metadata") or meta.get("token_usage") or meta.get("usage")
    model = meta.get("model_name") or meta.get("model")
    return usage_details(usage, model=model)


def _values(state: object) -> dict | None:
    """The channel values of one saved state, or None when it is not one."""
    if isinstance(state, dict):
        for key in ("values", "channel_values"):
            if isinstance(state.get(key), dict) and isinstance(state[key].get("messages"), list):
                return state[key]
        cp = as_dict(state.get("checkpoint"))
        if isinstance(as_dict(cp.get("channel_values")).get("messages"), list):
            return cp["channel_values"]
    # a StateSnapshot named tuple dumped as a JSON array: [values, next, config, metadata, created_at, ...]
    if (
        isinstance(state, list)
        and len(state) >= 4
        and isinstance(state[0], dict)
        and isinstance(state[0].get("messages"), list)
        and isinstance(state[1], list)
        and isinstance(state[2], dict)
    ):
        return state[0]
    return None


def _state_of(obj: object) -> tuple[list, dict] | None:
    """(messages, metadata) of a saved thread state or state history; None for anything else."""
    values = _values(obj)
    if values is not None:
        meta = {k: v for k, v in values.items() if k != "messages" and isinstance(v, str | int | float | bool)}
        state = obj if isinstance(obj, dict) else {"config": obj[2], "created_at": obj[4] if len(obj) > 4 else None}
        for key in ("created_at", "next"):
            if state.get(key) not in (None, "", []):
                meta[f"state_{key}"] = state[key]
        thread = as_dict(as_dict(state.get("config") or state.get("checkpoint")).get("configurable")) or as_dict(
            state.get("checkpoint")
        )
        if text(thread.get("thread_id")):
            meta["thread_id"] = text(thread["thread_id"])
        return values["messages"], meta
    if isinstance(obj, list) and obj and all(_values(s) is not None for s in obj):
        latest = max(obj, key=lambda s: len(_values(s)["messages"]))  # add_messages only appends
        messages, meta = _state_of(latest)
        meta["checkpoints"] = len(obj)
        return messages, meta
    return None


def parse_langchain(obj: object, filename: str = "") -> ParsedTrace:
    meta: dict = {}
    items = obj
    if (state := _state_of(obj)) is not None:
        items, meta = state
    elif isinstance(obj, dict):
        items = obj.get("messages")
        if not isinstance(items, list):
            raise ParseError(f"read as {LABEL}: no 'messages' list", filename=filename)
        meta = {k: v for k, v in obj.items() if k != "messages" and isinstance(v, str | int | float | bool)}
    if not isinstance(items, list):
        raise ParseError(f"read as {LABEL}: expected a list of messages", filename=filename)
    callers: dict[str, tuple[str, str]] = {}
    msgs: list[Message] = []
    last_ai = "assistant"
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise ParseError(f"read as {LABEL}: message {n + 1} is not an object", filename=filename, record=n)
        kind, fields = _unwrap(item)
        if not kind:
            label = text(item.get("type")) or text(item.get("role")) or "(none)"
            raise ParseError(
                f"read as {LABEL}: message {n + 1} has unknown type {label!r}", filename=filename, record=n
            )
        name = text(fields.get("name"))
        content = text_of(fields.get("content"))
        if kind == "human":
            msgs.append(Message(name or "user", "message", content, ""))
        elif kind == "system":
            msgs.append(Message(name, "system", content, "system"))
        elif kind == "ai":
            agent = name or "assistant"
            last_ai = agent
            details = _details(fields)
            calls = _calls(fields)
            if content.strip() or not calls:
                msgs.append(Message(agent, "message", content, "", details))
                details = {}
            for call_id, call_name, args in calls:
                callers[call_id] = (agent, call_name)
                msgs.append(Message(agent, "tool_call", call_text(call_name, args), "", details))
                details = {}
        else:
            agent, call_name = callers.get(text(fields.get("tool_call_id")), (last_ai, ""))
            call_name = name or call_name
            role = f"tool result: {call_name}" if call_name else "tool result"
            if fields.get("status") == "error":
                role += " (error)"
            msgs.append(Message(agent, "tool_output", content or json_text(fields.get("artifact")), role))
    task = next((m.content for m in msgs if m.agent == "user" and m.content.strip()), "")
    return build_trace("langchain", LABEL, msgs, filename=filename, mas_name="LangGraph", task=task, metadata=meta)
