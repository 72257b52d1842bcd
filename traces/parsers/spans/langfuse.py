"""Langfuse trace exports: a trace with its observations (``GET /api/public/traces/{id}``, the UI's
JSON export), one per file, a list of them, ``{"data": [...]}``, or one per line.

``{"id", "name", "input", "output", "sessionId", "tags", "metadata", "observations": [{"id",
"traceId", "type": "GENERATION" | "SPAN" | "EVENT" | "AGENT" | "TOOL" | "CHAIN" | ..., "name",
"startTime", "endTime", "parentObservationId", "model", "input", "output", "usage": {"input",
"output"} | "usageDetails", "level", "statusMessage", "metadata"}]}``.

A GENERATION's input is a chat message list (or a prompt string) and its output a message (or a
string). A SPAN is an agent invocation when it is typed AGENT or its metadata names the agent
(``agent_name``, ``agent``, LangGraph's ``langgraph_node``); otherwise a wrapper.
"""

from __future__ import annotations

from collections.abc import Iterator

from traces.parsers.base import ParseError
from traces.parsers.spans.conventions import chat_message
from traces.parsers.spans.model import AGENT, CHAIN, EVENT, GUARDRAIL, LLM, TOOL, Msg, Span, as_int, as_text, epoch

LOOKED_FOR = "observations with input/output (GENERATION messages, SPAN/TOOL values)"
_TYPES = {"GENERATION": LLM, "AGENT": AGENT, "TOOL": TOOL, "EVENT": EVENT, "GUARDRAIL": GUARDRAIL}


def is_langfuse(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("observations"), list) and "id" in obj


def langfuse_spans(trace: dict, *, filename: str, record: int) -> Iterator[Span]:
    trace_id = str(trace.get("id") or "")
    meta = trace.get("metadata") if isinstance(trace.get("metadata"), dict) else {}
    root = Span(
        id=f"trace:{trace_id}",
        trace=trace_id,
        name=str(trace.get("name") or ""),
        kind=CHAIN,
        record=record,
        start=epoch(trace.get("timestamp")),
        input_text=as_text(trace.get("input")),
        output_text=as_text(trace.get("output")),
    )
    root.info.update(
        {
            k: v
            for k, v in (
                ("session", trace.get("sessionId")),
                ("tags", trace.get("tags")),
                ("benchmark", meta.get("benchmark")),
                ("framework", meta.get("framework")),
            )
            if v
        }
    )
    yield root
    for n, obs in enumerate(trace["observations"], start=1):
        if not isinstance(obs, dict):
            raise ParseError(
                f"Langfuse: observation {n} is {type(obs).__name__}, expected an object",
                filename=filename,
                record=record,
            )
        if not obs.get("id"):
            raise ParseError(f"Langfuse: observation {n} has no id", filename=filename, record=record)
        yield _observation(obs, trace_id, n, filename=filename, record=record)


def _observation(obs: dict, trace_id: str, n: int, *, filename: str, record: int) -> Span:
    meta = obs.get("metadata") if isinstance(obs.get("metadata"), dict) else {}
    typ = str(obs.get("type") or "SPAN").upper()
    kind = _TYPES.get(typ, CHAIN)
    agent = str(meta.get("agent_name") or meta.get("agent") or meta.get("langgraph_node") or "")
    if kind == CHAIN and agent:
        kind = AGENT
    name = str(obs.get("name") or "")
    span = Span(
        id=str(obs["id"]),
        trace=trace_id,
        parent=str(obs.get("parentObservationId") or f"trace:{trace_id}"),
        name=name,
        kind=kind,
        order=n,
        record=record,
        start=epoch(obs.get("startTime")),
        end=epoch(obs.get("endTime")),
        agent=agent or (name if kind == AGENT else ""),
        model=str(obs.get("model") or ""),
        error=str(obs.get("statusMessage") or "error") if str(obs.get("level") or "").upper() == "ERROR" else "",
    )
    usage = obs.get("usageDetails") if isinstance(obs.get("usageDetails"), dict) else obs.get("usage")
    if isinstance(usage, dict):
        span.input_tokens = as_int(usage.get("input", usage.get("promptTokens", usage.get("input_tokens"))))
        span.output_tokens = as_int(usage.get("output", usage.get("completionTokens", usage.get("output_tokens"))))
    inp, out = obs.get("input"), obs.get("output")
    if kind == LLM:
        span.inputs = _messages(inp, "user")
        span.outputs = _messages(out, "assistant")
    elif kind == TOOL:
        span.tool_name = name
        span.tool_args = as_text(inp)
        span.output_text = as_text(out)
    else:
        span.input_text, span.output_text = as_text(inp), as_text(out)
        if kind == EVENT and not span.output_text:
            span.output_text, span.input_text = span.input_text, ""
    return span


def _messages(value: object, role: str) -> list[Msg]:
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return [chat_message(m) for m in value]
    if isinstance(value, dict) and ("content" in value or "tool_calls" in value):
        return [chat_message({"role": role, **value})]
    text = as_text(value)
    return [Msg(role, text)] if text else []
