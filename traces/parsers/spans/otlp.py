"""OTLP/JSON traces (the OpenTelemetry protocol's JSON encoding; collector file exports, Logfire,
Langfuse and Phoenix OTLP exports): ``{"resourceSpans": [{"resource": {"attributes": [...]},
"scopeSpans": [{"scope": {"name"}, "spans": [{"traceId", "spanId", "parentSpanId", "name",
"startTimeUnixNano", "endTimeUnixNano", "attributes": [{"key", "value": {"stringValue": ...}}],
"events": [...], "status": {"code", "message"}}]}]}]}``. One such object per line (JSONL, as the
collector's file exporter writes) or one per file; ``scopeSpans`` is also read under its old name
``instrumentationLibrarySpans``. The attributes are read by ``conventions.fill`` (GenAI or
OpenInference, whichever the span uses).
"""

from __future__ import annotations

from collections.abc import Iterator

from traces.parsers.base import ParseError
from traces.parsers.spans.conventions import fill
from traces.parsers.spans.langsmith import otel_run_io
from traces.parsers.spans.model import Span, epoch

_ERROR_CODES = (2, "2", "STATUS_CODE_ERROR", "ERROR")
# instrumentation scope -> the framework whose agents the spans show (LLM-client scopes name none)
_FRAMEWORKS = {
    "crewai": "CrewAI",
    "langchain": "LangChain",
    "langgraph": "LangGraph",
    "llama_index": "LlamaIndex",
    "llamaindex": "LlamaIndex",
    "smolagents": "smolagents",
    "autogen": "AutoGen",
    "autogen_agentchat": "AutoGen",
    "openai_agents": "OpenAI Agents SDK",
    "agents": "OpenAI Agents SDK",
    "pydantic_ai": "Pydantic AI",
    "pydantic-ai": "Pydantic AI",
    "dspy": "DSPy",
    "agno": "Agno",
    "google_adk": "Google ADK",
    "haystack": "Haystack",
}


def framework_of(scope: str) -> str:
    """``openinference.instrumentation.smolagents`` -> smolagents; ``...instrumentation.crewai`` -> CrewAI."""
    tail = scope.rsplit("instrumentation.", 1)[-1].split(".")[0].lower()
    return _FRAMEWORKS.get(tail, "")


def any_value(v: object) -> object:
    """An OTLP AnyValue ({"stringValue": "x"}, {"intValue": "3"}, arrays, kvlists) as a Python value."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        iv = v["intValue"]
        return int(iv) if isinstance(iv, str) and iv.lstrip("-").isdigit() else iv
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [any_value(x) for x in (v["arrayValue"] or {}).get("values") or ()]
    if "kvlistValue" in v:
        return key_values((v["kvlistValue"] or {}).get("values") or ())
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def key_values(items: object) -> dict:
    out: dict = {}
    if isinstance(items, list):
        for kv in items:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[kv["key"]] = any_value(kv.get("value"))
    elif isinstance(items, dict):  # some exporters write attributes as a plain object
        out.update(items)
    return out


def is_otlp(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def otlp_spans(obj: object, *, filename: str, record: int, order: int) -> Iterator[Span]:
    if not is_otlp(obj):
        raise ParseError("OTLP: expected an object with a 'resourceSpans' list", filename=filename, record=record)
    for rs in obj["resourceSpans"]:
        if not isinstance(rs, dict):
            raise ParseError("OTLP: a resourceSpans entry is not an object", filename=filename, record=record)
        resource = key_values((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            if not isinstance(ss, dict):
                continue
            scope = (ss.get("scope") or ss.get("instrumentationLibrary") or {}).get("name") or ""
            for raw in ss.get("spans") or ():
                if not isinstance(raw, dict):
                    raise ParseError("OTLP: a span is not an object", filename=filename, record=record)
                order += 1
                yield _span(raw, resource, scope, filename=filename, record=record, order=order)


def _span(raw: dict, resource: dict, scope: str, *, filename: str, record: int, order: int) -> Span:
    trace_id, span_id = raw.get("traceId"), raw.get("spanId")
    if not trace_id or not span_id:
        raise ParseError(f"OTLP: span {raw.get('name', '?')!r} has no traceId/spanId", filename=filename, record=record)
    status = raw.get("status") or {}
    span = Span(
        id=str(span_id),
        trace=str(trace_id),
        parent=str(raw.get("parentSpanId") or ""),
        name=str(raw.get("name") or ""),
        order=order,
        record=record,
        start=epoch(raw.get("startTimeUnixNano")),
        end=epoch(raw.get("endTimeUnixNano")),
        error=str(status.get("message") or "error") if status.get("code") in _ERROR_CODES else "",
    )
    attrs = key_values(raw.get("attributes"))
    events = [
        (str(e.get("name") or ""), key_values(e.get("attributes")))
        for e in raw.get("events") or ()
        if isinstance(e, dict)
    ]
    fill(span, {**resource, **attrs}, events)
    otel_run_io(span, attrs)  # LangSmith's exporter: the run's JSON in plain gen_ai.prompt/completion
    if scope:
        span.info.setdefault("scope", scope)
        if fw := framework_of(scope):
            span.info.setdefault("framework", fw)
    return span
