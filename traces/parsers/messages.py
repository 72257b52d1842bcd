"""Chat-message lists: generic ``[{role|name|agent, content}]`` JSON/JSONL, AG2, Who&When."""

from __future__ import annotations

import json
import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.jsonload import loads
from traces.parsers.render import Message, render, text_of

TERMINAL_AGENTS = frozenset({"computer_terminal", "computerterminal", "code_executor", "executor"})
_ROLE_SUFFIX = re.compile(r"\s*\(.*\)\s*$")
# Who&When's Magentic-One roles name the addressee: "Orchestrator (-> WebSurfer)"
_ADDRESSEE = re.compile(r"\(\s*->\s*([^()]+?)\s*\)\s*$")
_CODE_FENCE = re.compile(r"```(?:python|py|sh|bash|shell)?\s*\n")


def agent_of(item: dict) -> tuple[str, str]:
    """(agent, role): the agent is name/agent/sender, else the role without a "(thought)"-style
    suffix. Magentic-One's own log (``log.jsonl``: ``{"source": "Orchestrator (-> WebSurfer)",
    "message", "type", "timestamp"}``) names the agent in ``source`` with the same suffixes: the
    suffixed name is the role, the agent its name before it."""
    role = item.get("role")
    role = role if isinstance(role, str) else ""
    for key in ("name", "agent", "sender"):
        val = item.get(key)
        if isinstance(val, str) and val:
            return val, role
    source = item.get("source")
    if not role and isinstance(source, str) and source and "message" in item:
        role = source
    return (_ROLE_SUFFIX.sub("", role) or role), role


def _is_executor(agent: str) -> bool:
    name = agent.lower()
    return name in TERMINAL_AGENTS or "proxy" in name or "executor" in name


def kind_of(agent: str, role: str, content: str, item: dict) -> str:
    r = role.lower()
    if r == "system":
        return "system"
    if r in ("tool", "function", "ipython") or agent.lower() in TERMINAL_AGENTS:
        return "tool_output"
    if content.startswith("exitcode:"):
        return "tool_output"
    if item.get("tool_calls") or item.get("function_call"):
        return "tool_call"
    return "message"


def to_messages(items: list, *, filename: str = "") -> list[Message]:
    msgs: list[Message] = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise ParseError(f"message {n} is {type(item).__name__}, expected an object", filename=filename)
        agent, role = agent_of(item)
        content = text_of(item.get("content") if "content" in item else item.get("message"))
        calls = item.get("tool_calls") or ([item["function_call"]] if item.get("function_call") else [])
        if isinstance(calls, list) and calls:
            content = "\n".join([content, *map(_call_text, calls)]) if content else "\n".join(map(_call_text, calls))
        if not agent and not content:
            # nothing to show and nobody to show it for: not a chat message (a record of another
            # shape read as one); refused rather than stored as an empty "unknown" step
            keys = ", ".join(sorted(map(str, item))[:6]) or "no keys"
            raise ParseError(
                f"message {n + 1} has no role, name or content (keys: {keys}): not a chat message", filename=filename
            )
        to = _ADDRESSEE.search(role)
        msgs.append(Message(agent, kind_of(agent, role, content, item), content, role, recipient=to[1] if to else ""))
    # code followed by its execution output: a tool call and a tool output. MathChat's
    # proxy answers code with bare results ("29.0"), so an executor's reply counts too.
    for prev, nxt in zip(msgs, msgs[1:], strict=False):
        if prev.kind != "message" or prev.agent == nxt.agent or not _has_fence(prev.content):
            continue  # the substring test first: the regex would scan every message without a fence
        if not _CODE_FENCE.search(prev.content):
            continue
        if nxt.kind == "tool_output" or (nxt.kind == "message" and _is_executor(nxt.agent)):
            prev.kind, nxt.kind = "tool_call", "tool_output"
    return msgs


def _has_fence(text: str) -> bool:
    """``"```" in text``, twice as fast on the many messages without a backtick (one memchr)."""
    first = text.find("`")
    return first >= 0 and text.find("```", first) >= 0


def _call_text(call: object) -> str:
    """One OpenAI-style tool call as ``call name(arguments)``."""
    if not isinstance(call, dict):
        return f"call {text_of(call)}"
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    args = fn.get("arguments", "")
    args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f"call {fn.get('name', '?')}({args})"


def load_json(text: str, *, filename: str = "") -> object:
    try:
        return loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"invalid JSON: {e.msg} (column {e.colno})", filename=filename, line=e.lineno) from None


def load_jsonl(text: str, *, filename: str = "", broken: list[tuple[int, str]] | None = None) -> list:
    """The values of a JSONL text's lines; a line that is not JSON is refused, naming it, or with
    ``broken`` ("import the rest") listed there as (line, why) and skipped."""
    rows = []
    for n, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            rows.append(loads(raw))
        except json.JSONDecodeError as e:
            why = f"invalid JSON line: {e.msg} (column {e.colno})"
            if broken is None:
                raise ParseError(why, filename=filename, line=n) from None
            broken.append((n, why))
    return rows


def message_list(obj: object) -> list | None:
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        for key in ("messages", "history", "trajectory", "chat_history", "conversation"):
            if isinstance(obj.get(key), list):
                return obj[key]
    return None


def parse_messages(text: str, *, filename: str = "", fmt: str = "messages_json", obj: object = None) -> ParsedTrace:
    if obj is None:
        stripped = text.lstrip()
        if stripped.startswith("{") and "\n{" in stripped.rstrip() and _is_jsonl(stripped):
            obj = load_jsonl(text, filename=filename)
        else:
            obj = load_json(text, filename=filename)
    items = message_list(obj)
    if items is None:
        raise ParseError("no list of messages found (expected a list or messages/history)", filename=filename)
    raw, steps = render(to_messages(items, filename=filename))
    meta: dict = {"source_format": "json"}
    task = ""
    if isinstance(obj, dict):
        task = text_of(obj.get("task") or obj.get("question") or obj.get("prompt") or "")
    return ParsedTrace(format=fmt, raw_text=raw, steps=steps, task=task, metadata=meta)


def _is_jsonl(text: str) -> bool:
    first = text.split("\n", 1)[0]
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False
