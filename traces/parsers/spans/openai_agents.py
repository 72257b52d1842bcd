"""OpenAI Agents SDK traces: what ``Trace.export()`` and ``Span.export()`` give a tracing processor.

A file holds ``{"trace": {...}, "spans": [...]}``, ``{"data": [...]}``, a JSON list, or one object per
line, each object ``{"object": "trace", "id", "workflow_name", "group_id", "metadata"}`` or
``{"object": "trace.span", "id", "trace_id", "parent_id", "started_at", "ended_at", "error",
"span_data": {"type": ...}}``. Span data types: ``agent`` (name, tools, handoffs), ``generation``
(input / output chat messages, model, usage), ``response`` (response_id; input items and the
response's output items when the processor kept them), ``function`` (name, input, output),
``handoff`` (from_agent, to_agent), ``guardrail`` (name, triggered), ``custom`` (name, data),
``mcp_tools``, ``transcription`` / ``speech``.
"""

from __future__ import annotations

from traces.parsers.base import ParseError
from traces.parsers.spans.conventions import chat_message
from traces.parsers.spans.model import (
    AGENT,
    CHAIN,
    EVENT,
    GUARDRAIL,
    HANDOFF,
    LLM,
    TOOL,
    Msg,
    Span,
    ToolCall,
    as_int,
    as_text,
    epoch,
)

LOOKED_FOR = "generation/response input and output, function input/output, agent, handoff and guardrail spans"
FRAMEWORK = "OpenAI Agents SDK"


def is_agents_object(obj: object) -> bool:
    if not isinstance(obj, dict):
        return False
    if obj.get("object") in ("trace", "trace.span"):
        return True
    return isinstance(obj.get("span_data"), dict) and "trace_id" in obj


def is_agents_bundle(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("spans"), list) and isinstance(obj.get("trace"), dict)


def trace_info(obj: dict) -> dict:
    info = {"title": str(obj.get("workflow_name") or ""), "framework": FRAMEWORK}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    for key in ("benchmark", "task"):
        if meta.get(key):
            info[key] = str(meta[key])
    if obj.get("group_id"):
        info["session"] = str(obj["group_id"])
    if obj.get("workflow_name"):
        info["workflow"] = str(obj["workflow_name"])
    return info


def agents_span(obj: dict, *, filename: str, record: int, order: int) -> Span:
    data = obj.get("span_data")
    if not isinstance(data, dict) or not obj.get("id") or not obj.get("trace_id"):
        raise ParseError("OpenAI Agents: a span needs id, trace_id and span_data", filename=filename, record=record)
    typ = str(data.get("type") or "")
    err = obj.get("error")
    span = Span(
        id=str(obj["id"]),
        trace=str(obj["trace_id"]),
        parent=str(obj.get("parent_id") or ""),
        name=str(data.get("name") or typ),
        order=order,
        record=record,
        start=epoch(obj.get("started_at")),
        end=epoch(obj.get("ended_at")),
        error=_error(err),
    )
    span.info["framework"] = FRAMEWORK
    if typ == "agent":
        span.kind, span.agent = AGENT, str(data.get("name") or "")
    elif typ == "generation":
        span.kind, span.model = LLM, str(data.get("model") or "")
        span.inputs = _messages(data.get("input"))
        span.outputs = _messages(data.get("output"))
        _usage(span, data.get("usage"))
    elif typ == "response":
        span.kind = LLM
        span.inputs = _items(data.get("input"))
        resp = data.get("response") if isinstance(data.get("response"), dict) else {}
        span.outputs = _items(resp.get("output") or data.get("output"))
        span.model = str(resp.get("model") or data.get("model") or "")
        _usage(span, resp.get("usage") or data.get("usage"))
    elif typ == "function":
        span.kind, span.tool_name = TOOL, span.name
        span.tool_args, span.output_text = as_text(data.get("input")), as_text(data.get("output"))
    elif typ == "handoff":
        span.kind, span.agent, span.target = HANDOFF, str(data.get("from_agent") or ""), str(data.get("to_agent") or "")
    elif typ == "guardrail":
        span.kind = GUARDRAIL
        span.output_text = "triggered" if data.get("triggered") else "passed"
    elif typ in ("custom", "mcp_tools", "transcription", "speech", "speech_group"):
        span.kind = EVENT
        payload = data.get("data") if typ == "custom" else data.get("result") or data.get("output") or data.get("input")
        span.output_text = as_text(payload)
        if typ == "mcp_tools":
            span.name = f"MCP tools of {data.get('server') or '?'}"
    else:
        span.kind = CHAIN
    return span


def _error(err: object) -> str:
    if not isinstance(err, dict):
        return as_text(err)
    data = err.get("data")
    detail = as_text(data.get("error") if isinstance(data, dict) and "error" in data else data)
    return ": ".join(x for x in (as_text(err.get("message")), detail) if x)


def _usage(span: Span, usage: object) -> None:
    if isinstance(usage, dict):
        span.input_tokens = as_int(usage.get("input_tokens", usage.get("prompt_tokens")))
        span.output_tokens = as_int(usage.get("output_tokens", usage.get("completion_tokens")))


def _messages(value: object) -> list[Msg]:
    if isinstance(value, str):
        return [Msg("user", value)] if value else []
    if not isinstance(value, list):
        return []
    return [chat_message(m) for m in value if isinstance(m, dict)]


def _items(value: object) -> list[Msg]:
    """Responses API items: messages with content parts, function calls and their outputs."""
    if isinstance(value, str):
        return [Msg("user", value)]
    out: list[Msg] = []
    for item in value or ():
        if not isinstance(item, dict):
            continue
        typ = item.get("type")
        if typ == "function_call":
            call = ToolCall(str(item.get("name") or ""), as_text(item.get("arguments")), str(item.get("call_id") or ""))
            if out and out[-1].role == "assistant" and not out[-1].tool_call_id:
                out[-1].tool_calls.append(call)
            else:
                out.append(Msg("assistant", "", tool_calls=[call]))
        elif typ == "function_call_output":
            out.append(Msg("tool", as_text(item.get("output")), tool_call_id=str(item.get("call_id") or "")))
        elif typ == "reasoning":
            summary = "\n".join(as_text(s.get("text")) for s in item.get("summary") or () if isinstance(s, dict))
            if summary:
                out.append(Msg("assistant", f"(reasoning) {summary}"))
        elif "role" in item or typ == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "\n".join(as_text(p.get("text")) for p in content if isinstance(p, dict) and "text" in p)
            out.append(Msg(str(item.get("role") or "assistant"), as_text(content)))
    return out
