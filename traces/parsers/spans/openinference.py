"""OpenInference span records (Arize Phoenix exports, JSONL or a JSON list): one span per record,

``{"name", "context": {"trace_id", "span_id"}, "parent_id", "span_kind", "start_time", "end_time",
"status_code", "status_message", "attributes": {...}, "events": [...]}``. Attributes may be the
spec's flat dotted keys (``llm.input_messages.0.message.role``) or nested objects (Phoenix's
``get_spans`` / dataframe exports); both are read. The OpenTelemetry Python SDK's own JSON
(``ConsoleSpanExporter``: ``kind``, ``status: {status_code}``, ``resource``) has the same shape,
and spans with ``gen_ai.*`` attributes instead of OpenInference ones are read too.
"""

from __future__ import annotations

from traces.parsers.base import ParseError
from traces.parsers.spans.conventions import fill
from traces.parsers.spans.model import Span, epoch, flatten


def is_span_record(obj: object) -> bool:
    if not isinstance(obj, dict):
        return False
    ctx = obj.get("context")
    has_ids = (isinstance(ctx, dict) and "span_id" in ctx) or "context.span_id" in obj
    return has_ids and ("attributes" in obj or any(k.startswith("attributes.") for k in obj))


def record_span(obj: object, *, filename: str, record: int, order: int) -> Span:
    if not isinstance(obj, dict):
        raise ParseError(f"span record is {type(obj).__name__}, expected an object", filename=filename, record=record)
    ctx = obj.get("context") if isinstance(obj.get("context"), dict) else {}
    trace_id = ctx.get("trace_id") or obj.get("context.trace_id") or obj.get("trace_id")
    span_id = ctx.get("span_id") or obj.get("context.span_id") or obj.get("span_id")
    if not trace_id or not span_id:
        raise ParseError("span record has no context.trace_id / context.span_id", filename=filename, record=record)
    attrs = flatten(obj.get("attributes") or {})
    for key, value in obj.items():  # dataframe-style columns: "attributes.llm.model_name"
        if key.startswith("attributes."):
            attrs.update(
                flatten(value, key[11:] + ".") if isinstance(value, dict | list) and value else {key[11:]: value}
            )
    resource = obj.get("resource") if isinstance(obj.get("resource"), dict) else {}
    attrs = {**flatten(resource.get("attributes") or {}), **attrs}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    code = str(obj.get("status_code") or status.get("status_code") or "").upper()
    span = Span(
        id=str(span_id),
        trace=str(trace_id),
        parent=str(obj.get("parent_id") or obj.get("parent_span_id") or ""),
        name=str(obj.get("name") or ""),
        order=order,
        record=record,
        start=epoch(obj.get("start_time")),
        end=epoch(obj.get("end_time")),
        error=str(obj.get("status_message") or status.get("description") or "error") if code == "ERROR" else "",
    )
    if "openinference.span.kind" not in attrs and isinstance(obj.get("span_kind"), str):
        attrs["openinference.span.kind"] = obj["span_kind"]
    events = [
        (str(e.get("name") or ""), flatten(e.get("attributes") or {}))
        for e in obj.get("events") or ()
        if isinstance(e, dict)
    ]
    fill(span, attrs, events)
    return span
