"""Span attributes -> Span fields, for the two attribute vocabularies in use.

OpenTelemetry GenAI semantic conventions (``gen_ai.*``), in all three styles seen in exports:

* current: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``
  (JSON: ``[{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id", "name",
  "arguments"}, {"type": "tool_call_response", "id", "response"}]}]``);
* indexed attributes (OpenLLMetry and the 2024 conventions): ``gen_ai.prompt.N.role|content``,
  ``gen_ai.completion.N.role|content|tool_calls.M.name|arguments|id``;
* events: ``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice`` (as span events, or as
  the JSON ``events`` attribute Logfire writes), and ``gen_ai.content.prompt|completion`` events.

Plus ``gen_ai.operation.name`` (chat / execute_tool / invoke_agent ...), ``gen_ai.agent.name``,
``gen_ai.request|response.model``, ``gen_ai.usage.input|output_tokens`` (and the older
``prompt|completion_tokens``), ``gen_ai.tool.name|call.id|call.arguments|call.result``.

OpenInference (Arize Phoenix): ``openinference.span.kind``, ``llm.input_messages.N.message.role|
content|name|tool_call_id|tool_calls.M.tool_call.{id,function.name,function.arguments}|contents.K.
message_content.text``, ``llm.output_messages...``, ``llm.model_name``, ``llm.token_count.prompt|
completion``, ``input.value`` / ``output.value``, ``tool.name``, ``agent.name``, ``graph.node.id``.
"""

from __future__ import annotations

import re

from traces.parsers.spans.model import (
    AGENT,
    CHAIN,
    GUARDRAIL,
    LLM,
    TOOL,
    Msg,
    Span,
    ToolCall,
    as_int,
    as_text,
    decode_json,
    indexed,
)

LOOKED_FOR = (
    "gen_ai.input.messages / gen_ai.output.messages, gen_ai.prompt.N / gen_ai.completion.N, gen_ai.* events, "
    "llm.input_messages.N / llm.output_messages.N, input.value / output.value, tool calls"
)

_OI_KINDS = {"LLM": LLM, "TOOL": TOOL, "AGENT": AGENT, "GUARDRAIL": GUARDRAIL}
_GENAI_OPS = {
    "chat": LLM,
    "text_completion": LLM,
    "generate_content": LLM,
    "completion": LLM,
    "execute_tool": TOOL,
    "invoke_agent": AGENT,
    "create_agent": AGENT,
}
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def fill(span: Span, attrs: dict, events: list[tuple[str, dict]] = ()) -> None:
    """Fill ``span`` from its (flat, dotted) attributes and its events, whichever vocabulary they use."""
    if any(k.startswith(("llm.", "input.value", "output.value", "openinference.")) for k in attrs):
        _openinference(span, attrs)
    if any(k.startswith("gen_ai.") for k in attrs) or events or "events" in attrs:
        _genai(span, attrs, events)
    info = span.info
    for key, name in (("service.name", "service"), ("session.id", "session"), ("benchmark", "benchmark")):
        if isinstance(attrs.get(key), str) and attrs[key]:
            info.setdefault(name, attrs[key])


# --- OpenInference ---------------------------------------------------------------------------------


def _openinference(span: Span, a: dict) -> None:
    kind = str(a.get("openinference.span.kind") or "").upper()
    span.kind = _OI_KINDS.get(kind, span.kind)
    span.agent = span.agent or _str(a.get("agent.name")) or _str(a.get("graph.node.id"))
    if span.kind == AGENT and not span.agent:
        span.agent = _smolagents_agent(span.name, a) or span.name
    span.model = span.model or _str(a.get("llm.model_name"))
    span.input_tokens = _first_int(span.input_tokens, a.get("llm.token_count.prompt"))
    span.output_tokens = _first_int(span.output_tokens, a.get("llm.token_count.completion"))
    span.inputs = span.inputs or _oi_messages(a, "llm.input_messages.")
    span.outputs = span.outputs or _oi_messages(a, "llm.output_messages.")
    if not span.inputs:
        prompts = indexed(a, "llm.prompts.")
        span.inputs = [Msg("user", as_text(p.get("prompt.text") or p.get(""))) for p in prompts.values()]
    span.input_text = span.input_text or as_text(a.get("input.value"))
    span.output_text = span.output_text or as_text(a.get("output.value"))
    if span.kind == TOOL:
        span.tool_name = span.tool_name or _str(a.get("tool.name")) or span.name
        span.tool_args = span.tool_args or as_text(a.get("tool_call.function.arguments") or a.get("input.value"))
        span.tool_call_id = span.tool_call_id or _str(a.get("tool_call.id"))
        span.input_text = ""
    if span.kind == LLM and (span.inputs or span.outputs):
        span.input_text = span.output_text = ""  # the messages say it; input.value is the same payload as JSON


# smolagents' managed-agent task template: "You're a helpful agent named '{{name}}'."
_NAMED_IN_TASK = re.compile(r"You're a helpful agent named '([^'\n]+)'")
_SMOLAGENTS_RUN = re.compile(r"^(\w+Agent)\.run$")


def _smolagents_agent(span_name: str, a: dict) -> str:
    """The agent of a smolagents run span (OpenInference's smolagents instrumentation names it
    ``CodeAgent.run`` / ``ToolCallingAgent.run``): a managed agent by the name its manager's task
    gives it; the manager, which lists its managed agents, as "manager"; else the agent's class."""
    run = _SMOLAGENTS_RUN.match(span_name)
    if not run:
        return ""
    task = _str(a.get("smolagents.task"))
    if not task:
        value = decode_json(a.get("input.value"))
        task = _str(value.get("task")) if isinstance(value, dict) else _str(value)
    if named := _NAMED_IN_TASK.search(task):
        return named[1]
    if a.get("smolagents.managed_agents.0.name"):
        return "manager"
    return run[1]


def _oi_messages(a: dict, prefix: str) -> list[Msg]:
    out = []
    for m in indexed(a, prefix).values():
        content = m.get("message.content")
        if content is None:
            parts = indexed(m, "message.contents.")
            content = "\n".join(
                as_text(p.get("message_content.text")) for p in parts.values() if p.get("message_content.text")
            )
        calls = [
            ToolCall(
                _str(c.get("tool_call.function.name")),
                as_text(c.get("tool_call.function.arguments")),
                _str(c.get("tool_call.id")),
            )
            for c in indexed(m, "message.tool_calls.").values()
        ]
        if m.get("message.function_call_name"):
            calls.append(
                ToolCall(_str(m["message.function_call_name"]), as_text(m.get("message.function_call_arguments_json")))
            )
        out.append(
            Msg(
                _str(m.get("message.role")),
                as_text(content),
                _str(m.get("message.name")),
                calls,
                _str(m.get("message.tool_call_id")),
            )
        )
    return out


# --- OpenTelemetry GenAI ---------------------------------------------------------------------------


def _genai(span: Span, a: dict, events: list[tuple[str, dict]]) -> None:
    op = _str(a.get("gen_ai.operation.name"))
    if op in _GENAI_OPS and span.kind == CHAIN:
        span.kind = _GENAI_OPS[op]
    span.agent = span.agent or _str(a.get("gen_ai.agent.name")) or _str(a.get("agent_name"))
    span.model = span.model or _str(a.get("gen_ai.response.model")) or _str(a.get("gen_ai.request.model"))
    span.input_tokens = _first_int(
        span.input_tokens, a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.prompt_tokens")
    )
    span.output_tokens = _first_int(
        span.output_tokens, a.get("gen_ai.usage.output_tokens"), a.get("gen_ai.usage.completion_tokens")
    )
    if system := _str(a.get("gen_ai.provider.name")) or _str(a.get("gen_ai.system")):
        span.info.setdefault("provider", system)
    inputs = parts_messages(decode_json(a.get("gen_ai.input.messages")))
    instructions = decode_json(a.get("gen_ai.system_instructions"))
    if instructions:
        text = _parts_text(instructions if isinstance(instructions, list) else [instructions])
        inputs = [Msg("system", text), *inputs] if text else inputs
    outputs = parts_messages(decode_json(a.get("gen_ai.output.messages")))
    if not inputs and not outputs:
        inputs, outputs = _indexed_messages(a, "gen_ai.prompt."), _indexed_messages(a, "gen_ai.completion.")
    if not inputs and not outputs:
        inputs, outputs = _event_messages(events, decode_json(a.get("events")))
    if inputs or outputs:
        span.inputs = span.inputs or inputs
        span.outputs = span.outputs or outputs
        if span.kind == CHAIN:
            span.kind = LLM
    if span.kind == TOOL or a.get("gen_ai.tool.name"):
        if span.kind == CHAIN:
            span.kind = TOOL
        span.tool_name = span.tool_name or _str(a.get("gen_ai.tool.name")) or span.name
        span.tool_call_id = span.tool_call_id or _str(a.get("gen_ai.tool.call.id"))
        span.tool_args = span.tool_args or as_text(a.get("gen_ai.tool.call.arguments") or a.get("tool_arguments"))
        span.output_text = span.output_text or as_text(a.get("gen_ai.tool.call.result") or a.get("tool_response"))
    if span.kind == AGENT:
        span.agent = span.agent or span.name
        span.output_text = span.output_text or as_text(a.get("final_result"))


def _parts_text(parts: list) -> str:
    texts = []
    for p in parts:
        if isinstance(p, dict) and p.get("type") in ("text", "reasoning", None) and "content" in p:
            texts.append(as_text(p.get("content")))
        elif isinstance(p, str):
            texts.append(p)
    return "\n".join(t for t in texts if t)


def parts_messages(value: object) -> list[Msg]:
    if not isinstance(value, list):
        return []
    out = []
    for m in value:
        if not isinstance(m, dict):
            continue
        parts = m.get("parts")
        if not isinstance(parts, list):  # a chat-completions-style message
            out.append(chat_message(m))
            continue
        calls, texts, call_id, other = [], [], "", []
        for p in parts:
            if not isinstance(p, dict):
                continue
            t = p.get("type")
            if t == "tool_call":
                calls.append(ToolCall(_str(p.get("name")), _args(p.get("arguments")), _str(p.get("id"))))
            elif t == "tool_call_response":
                call_id = _str(p.get("id"))
                texts.append(as_text(p.get("response") if "response" in p else p.get("result")))
            elif "content" in p:
                texts.append(as_text(p.get("content")))
            else:
                other.append(as_text(p))
        out.append(
            Msg(_str(m.get("role")), "\n".join(t for t in texts + other if t), _str(m.get("name")), calls, call_id)
        )
    return out


def chat_message(m: dict) -> Msg:
    calls = []
    for c in m.get("tool_calls") or ():
        if isinstance(c, dict):
            fn = c.get("function") if isinstance(c.get("function"), dict) else c
            calls.append(ToolCall(_str(fn.get("name")), _args(fn.get("arguments")), _str(c.get("id"))))
    content = m.get("content")
    if isinstance(content, list):
        content = _parts_text(content) or as_text(content)
    role = _str(m.get("role"))
    call_id = m.get("tool_call_id") or (m.get("id") if role == "tool" else "")
    return Msg(role, as_text(content), _str(m.get("name")), calls, _str(call_id))


def _indexed_messages(a: dict, prefix: str) -> list[Msg]:
    out = []
    for m in indexed(a, prefix).values():
        calls = [
            ToolCall(_str(c.get("name")), _args(c.get("arguments")), _str(c.get("id")))
            for c in indexed(m, "tool_calls.").values()
        ]
        content = m.get("content")
        if content is None and "" in m:
            content = m[""]
        out.append(Msg(_str(m.get("role")), as_text(content), _str(m.get("name")), calls, _str(m.get("tool_call_id"))))
    return out


def _event_messages(events: list[tuple[str, dict]], logfire_events: object) -> tuple[list[Msg], list[Msg]]:
    inputs: list[Msg] = []
    outputs: list[Msg] = []
    pairs = list(events)
    if isinstance(logfire_events, list):
        pairs += [(str(e.get("event.name", "")), e) for e in logfire_events if isinstance(e, dict)]
    for name, ev in pairs:
        if name in _EVENT_ROLES:
            body = ev.get("body") if isinstance(ev.get("body"), dict) else ev
            msg = chat_message({**body, "role": body.get("role") or _EVENT_ROLES[name]})
            if name == "gen_ai.tool.message" and not msg.tool_call_id:
                msg.tool_call_id = _str(body.get("id"))
            inputs.append(msg)
        elif name == "gen_ai.choice":
            body = ev.get("body") if isinstance(ev.get("body"), dict) else ev
            message = decode_json(body.get("message"))
            if not isinstance(message, dict):
                message = {k[8:]: v for k, v in body.items() if k.startswith("message.")}
            outputs.append(chat_message({"role": "assistant", **message}))
        elif name == "gen_ai.content.prompt":
            inputs += parts_messages(decode_json(ev.get("gen_ai.prompt"))) or [
                Msg("user", as_text(ev.get("gen_ai.prompt")))
            ]
        elif name == "gen_ai.content.completion":
            outputs += parts_messages(decode_json(ev.get("gen_ai.completion"))) or [
                Msg("assistant", as_text(ev.get("gen_ai.completion")))
            ]
    return inputs, outputs


def _args(value: object) -> str:
    return value if isinstance(value, str) else as_text(value) if value is not None else ""


def _str(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _first_int(current: int | None, *values: object) -> int | None:
    if current is not None:
        return current
    for v in values:
        n = as_int(v)
        if n is not None:
            return n
    return None
