"""Claude Code session JSONL and Claude Agent SDK message streams.

Claude Code writes one JSON object a line (``~/.claude/projects/<dir>/<session>.jsonl``):
``{"type": "user"|"assistant"|"system"|"summary", "uuid", "parentUuid", "sessionId",
"timestamp", "isSidechain", "cwd", "version", "gitBranch", "message": {"role", "model",
"content": "..." | [blocks], "usage": {...}}}``. The Agent SDK's stream (``--output-format
stream-json``, or its messages dumped as dicts) has ``{"type": "system", "subtype": "init",
"session_id", "model"}``, ``assistant`` / ``user`` records with ``parent_tool_use_id`` and a
closing ``{"type": "result", "duration_ms", "num_turns", "total_cost_usd", "usage"}``.

Content blocks become steps: ``text`` and ``thinking`` are messages (thinking with role
"thinking"), ``tool_use`` a tool call, ``tool_result`` a tool output. Decisions:

* Agents: the main agent is "Claude", the person "user". A subagent's records (``isSidechain``,
  ``agentId``, or SDK ``parent_tool_use_id``) take the ``subagent_type`` of the Task call that
  started it (else "subagent <agentId>"), so a session with subagents has several agents.
* A tool's output is the step of the agent that called the tool (role ``tool result: <name>``):
  tools are not agents, so they do not inflate the agent counts MAST statistics use.
* Token counts come once per API message (Claude Code repeats the same ``usage`` on each block's
  record of one message id); cache token counts stay in the record, not in the step.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message
from traces.parsers.shapes import as_dict, as_list, build_trace, call_text, json_text, rows_of, text, usage_details

LABEL = "Claude session JSONL"
MAIN, USER = "Claude", "user"
SNIFF = re.compile(r'"(?:parentUuid|sessionId|isSidechain|parent_tool_use_id)"|"subtype"\s*:\s*"init"')


def sniff(head: str) -> bool:
    return SNIFF.search(head) is not None


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in as_list(content):
        b = as_dict(block)
        if b.get("type") == "text":
            parts.append(text(b.get("text")))
        elif b.get("type") == "image":
            parts.append("[image]")
        else:
            parts.append(json_text(block))
    return "\n".join(parts)


class _Session:
    def __init__(self) -> None:
        self.tools: dict[str, tuple[str, str]] = {}  # tool_use id -> (tool name, calling agent)
        self.subagents: dict[str, str] = {}  # Task tool_use id -> subagent type
        self.pending_tasks: list[str] = []  # Task calls whose result has not come yet
        self.usage_seen: set[str] = set()

    def agent_of(self, rec: dict, role: str) -> str:
        parent = text(rec.get("parent_tool_use_id"))
        side = rec.get("isSidechain") is True or bool(rec.get("agentId"))
        if parent or side:
            if parent in self.subagents:
                return self.subagents[parent]
            if self.pending_tasks:
                return self.subagents[self.pending_tasks[-1]]
            agent_id = text(rec.get("agentId"))
            return f"subagent {agent_id}".strip()
        return MAIN if role == "assistant" else USER

    def block_message(self, b: dict, block: object, agent: str, details: dict) -> Message:
        """One content block of an API message as a step: text, thinking, a tool call (a Task or
        Agent call opens a subagent), a tool result (given to the agent that called the tool), an
        image, or any other block as JSON."""
        btype = text(b.get("type"))
        if btype == "text":
            return Message(agent, "message", text(b.get("text")), "", details)
        if btype in ("thinking", "redacted_thinking"):
            return Message(agent, "message", text(b.get("thinking")) or "[redacted thinking]", "thinking", details)
        if btype == "tool_use":
            name, call_id = text(b.get("name")), text(b.get("id"))
            self.tools[call_id] = (name, agent)
            tool_input = as_dict(b.get("input"))
            if name in ("Task", "Agent"):
                self.subagents[call_id] = text(tool_input.get("subagent_type")) or "subagent"
                self.pending_tasks.append(call_id)
            return Message(agent, "tool_call", call_text(name, b.get("input")), "", details)
        if btype == "tool_result":
            call_id = text(b.get("tool_use_id"))
            name, caller = self.tools.get(call_id, ("", agent))
            if call_id in self.pending_tasks:
                self.pending_tasks.remove(call_id)
            role_label = f"tool result: {name}" if name else "tool result"
            if b.get("is_error") is True:
                role_label += " (error)"
            return Message(caller, "tool_output", _result_text(b.get("content")), role_label, details)
        if btype == "image":
            return Message(agent, "message", "[image]", "", details)
        return Message(agent, "message", json_text(block), btype or "block", details)


def parse_claude(obj: object, filename: str = "") -> ParsedTrace:
    rows = rows_of(obj, filename=filename, what=LABEL)
    s = _Session()
    msgs: list[Message] = []
    meta: dict = {}
    task = ""
    models: list[str] = []
    for n, rec in enumerate(rows):
        kind = text(rec.get("type"))
        stamp = rec.get("timestamp")
        if kind == "summary":
            meta.setdefault("summaries", []).append(text(rec.get("summary")))
            continue
        if kind == "result":
            for key in ("subtype", "is_error", "duration_ms", "num_turns", "total_cost_usd", "result"):
                if key in rec:
                    meta[f"result_{key}"] = rec[key]
            continue
        if kind == "system":
            if rec.get("subtype") == "init":
                meta.update({k: rec[k] for k in ("cwd", "tools", "permissionMode") if k in rec})
                if text(rec.get("model")):
                    models.append(rec["model"])
            body = text(rec.get("content")) or json_text({k: v for k, v in rec.items() if k not in ("type",)})
            msgs.append(Message("", "system", body, "system", usage_details(None, timestamp=stamp)))
            continue
        if kind not in ("user", "assistant"):
            raise ParseError(
                f"read as {LABEL}: record type {kind or '(none)'!r} is not known", filename=filename, record=n
            )
        message = as_dict(rec.get("message"))
        role = text(message.get("role")) or kind
        agent = s.agent_of(rec, role)
        model = text(message.get("model"))
        usage = None
        msg_id = text(message.get("id")) or f"record {n}"
        if message.get("usage") is not None and msg_id not in s.usage_seen:
            s.usage_seen.add(msg_id)
            usage = message["usage"]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else as_list(content)
        for block in blocks:
            b = as_dict(block)
            details = usage_details(usage, model=model if role == "assistant" else None, timestamp=stamp)
            usage = None  # once per API message
            msg = s.block_message(b, block, agent, details)
            if text(b.get("type")) == "text" and role == "user" and not task and agent == USER:
                task = msg.content
            msgs.append(msg)
        for key in ("sessionId", "session_id"):
            if text(rec.get(key)):
                meta.setdefault("session_id", rec[key])
        for key in ("cwd", "version", "gitBranch"):
            if key in rec and key not in meta:
                meta[key] = rec[key]
    mas = "Claude Code" if "version" in meta or "gitBranch" in meta else "Claude Agent SDK"
    trace = build_trace(
        "claude",
        LABEL,
        msgs,
        filename=filename,
        agent_keys="message.role, isSidechain",
        mas_name=mas,
        task=task,
        external_id=str(meta.get("session_id", "")),
        metadata=meta,
    )
    if not trace.llm_name and models:
        trace.llm_name = models[0]
    return trace
