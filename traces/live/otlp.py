"""An OTLP/HTTP trace export request read into spans (the OpenTelemetry protocol specification,
"OTLP/HTTP"): binary protobuf (``application/x-protobuf``, ``ExportTraceServiceRequest`` from
``opentelemetry-proto``) or JSON (``application/json``, the protobuf JSON mapping with the ids in
hex), optionally gzip-compressed; and the answers the specification asks for (a partial success
with the count of rejected spans and why; errors as ``google.rpc.Status``).

Each span becomes the OTLP/JSON shape the file importer reads (``traces.parsers.spans.otlp``),
with its resource and scope beside it, so a live trace is read exactly as an exported file is.
A span without a valid trace id or span id (16 and 8 bytes, not all zero) is rejected and counted.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpError(ValueError):
    """The request cannot be read (the answer is a 400 saying this)."""


class OtlpTooLarge(OtlpError):
    """The body, compressed or not, is over the limit (the answer is a 413)."""


@dataclass
class Received:
    trace_id: str
    span_id: str
    ended: bool
    root: bool
    body: dict  # {"resource": {...}, "scope": {...}, "span": {...}}


@dataclass
class Decoded:
    spans: list[Received] = field(default_factory=list)
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str) -> None:
        self.rejected += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    @property
    def message(self) -> str:
        return "; ".join(f"{n} span{'s' if n > 1 else ''} {why}" for why, n in sorted(self.reasons.items()))


def gunzip(body: bytes, limit: int) -> bytes:
    """``body`` decompressed, refusing more than ``limit`` bytes (a gzip bomb) with OtlpError."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise OtlpError(f"the body is not valid gzip ({exc})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise OtlpTooLarge(f"the body decompresses to more than {limit:,} bytes")
    return out


def _value(v) -> dict:
    """An AnyValue as the protobuf JSON mapping writes it (int64 as a decimal string, bytes base64)."""
    which = v.WhichOneof("value")
    if which == "string_value":
        return {"stringValue": v.string_value}
    if which == "int_value":
        return {"intValue": str(v.int_value)}
    if which == "bool_value":
        return {"boolValue": v.bool_value}
    if which == "double_value":
        return {"doubleValue": v.double_value}
    if which == "array_value":
        return {"arrayValue": {"values": [_value(x) for x in v.array_value.values]}}
    if which == "kvlist_value":
        return {"kvlistValue": {"values": _attributes(v.kvlist_value.values)}}
    if which == "bytes_value":
        return {"bytesValue": base64.b64encode(v.bytes_value).decode()}
    return {}


def _attributes(kvs) -> list[dict]:
    return [{"key": kv.key, "value": _value(kv.value)} for kv in kvs]


def _span(sp) -> dict:
    """A protobuf Span in the OTLP/JSON shape (ids in hex, enums as integers, as the OTLP
    specification's JSON encoding writes them; fields at their default left out). Written out:
    ``MessageToDict`` costs several times as much per span."""
    out: dict = {"traceId": sp.trace_id.hex(), "spanId": sp.span_id.hex(), "name": sp.name}
    if sp.parent_span_id:
        out["parentSpanId"] = sp.parent_span_id.hex()
    if sp.trace_state:
        out["traceState"] = sp.trace_state
    if sp.kind:
        out["kind"] = sp.kind
    if sp.start_time_unix_nano:
        out["startTimeUnixNano"] = str(sp.start_time_unix_nano)
    if sp.end_time_unix_nano:
        out["endTimeUnixNano"] = str(sp.end_time_unix_nano)
    if sp.attributes:
        out["attributes"] = _attributes(sp.attributes)
    if sp.events:
        out["events"] = [{"timeUnixNano": str(e.time_unix_nano), "name": e.name,
                          "attributes": _attributes(e.attributes)} for e in sp.events]  # fmt: skip
    if sp.links:
        out["links"] = [{"traceId": link.trace_id.hex(), "spanId": link.span_id.hex(),
                         "attributes": _attributes(link.attributes), **({"flags": link.flags} if link.flags else {})}
                        for link in sp.links]  # fmt: skip
    if sp.HasField("status") and (sp.status.code or sp.status.message):
        out["status"] = {"code": sp.status.code, "message": sp.status.message}
    if sp.flags:
        out["flags"] = sp.flags
    return out


def _protobuf_dict(body: bytes) -> dict:
    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpError(f"the body is not an ExportTraceServiceRequest ({exc})") from None
    resource_spans = []
    for rs in request.resource_spans:
        scopes = []
        for ss in rs.scope_spans:
            scope: dict = {"name": ss.scope.name}
            if ss.scope.version:
                scope["version"] = ss.scope.version
            if ss.scope.attributes:
                scope["attributes"] = _attributes(ss.scope.attributes)
            scopes.append({"scope": scope, "spans": [_span(sp) for sp in ss.spans]})
        entry: dict = {"resource": {"attributes": _attributes(rs.resource.attributes)}, "scopeSpans": scopes}
        if rs.schema_url:
            entry["schemaUrl"] = rs.schema_url
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}


def _valid_id(value: object, length: int) -> bool:
    if not isinstance(value, str) or len(value) != length:
        return False
    try:
        return int(value, 16) != 0
    except ValueError:
        return False


def decode(body: bytes, content_type: str) -> Decoded:
    """The spans of one export request (module docstring); raises OtlpError when it cannot be read."""
    if content_type == PROTOBUF:
        data = _protobuf_dict(body)
    else:
        try:
            data = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise OtlpError(f"the body is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise OtlpError("the body is not an ExportTraceServiceRequest object")
    out = Decoded()
    resource_spans = data.get("resourceSpans") or []
    if not isinstance(resource_spans, list):
        raise OtlpError("resourceSpans is not a list")
    for rs in resource_spans:
        if not isinstance(rs, dict):
            raise OtlpError("an entry of resourceSpans is not an object")
        resource = rs.get("resource") or {}
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            if not isinstance(ss, dict):
                raise OtlpError("an entry of scopeSpans is not an object")
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            for span in ss.get("spans") or []:
                if not isinstance(span, dict):
                    out.reject("are not objects")
                    continue
                trace_id, span_id = str(span.get("traceId") or "").lower(), str(span.get("spanId") or "").lower()
                if not _valid_id(trace_id, 32):
                    out.reject("have no valid traceId (32 hex digits, not all zero)")
                    continue
                if not _valid_id(span_id, 16):
                    out.reject("have no valid spanId (16 hex digits, not all zero)")
                    continue
                span["traceId"], span["spanId"] = trace_id, span_id
                parent = str(span.get("parentSpanId") or "").lower()
                body_ = {"resource": resource, "scope": scope, "span": span}
                if rs.get("schemaUrl"):
                    body_["schemaUrl"] = rs["schemaUrl"]
                out.spans.append(Received(trace_id, span_id, bool(span.get("endTimeUnixNano")),
                                          not _valid_id(parent, 16), body_))  # fmt: skip
    return out


def success_body(decoded: Decoded, content_type: str) -> bytes:
    """ExportTraceServiceResponse: empty, or a partial success with the rejected count and why."""
    if content_type == PROTOBUF:
        response = trace_service_pb2.ExportTraceServiceResponse()
        if decoded.rejected:
            response.partial_success.rejected_spans = decoded.rejected
            response.partial_success.error_message = decoded.message
        return response.SerializeToString()
    if not decoded.rejected:
        return b"{}"
    return json.dumps({"partialSuccess": {"rejectedSpans": str(decoded.rejected),
                                          "errorMessage": decoded.message}}).encode()  # fmt: skip


def error_body(code: int, message: str, content_type: str) -> bytes:
    """A google.rpc.Status (``code``: a gRPC code, 3 INVALID_ARGUMENT, 16 UNAUTHENTICATED...)."""
    if content_type == PROTOBUF:
        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message}).encode()


def document(bodies: list[dict]) -> dict:
    """The stored spans of one trace as one OTLP/JSON document, grouped by resource and scope."""
    groups: dict[str, dict] = {}
    for b in bodies:
        key = json.dumps([b.get("resource"), b.get("scope"), b.get("schemaUrl")], sort_keys=True)
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"resource": b.get("resource") or {}, "scope": b.get("scope") or {}, "spans": []}
            if b.get("schemaUrl"):
                group["schemaUrl"] = b["schemaUrl"]
        group["spans"].append(b["span"])
    return {
        "resourceSpans": [
            {"resource": g["resource"], "scopeSpans": [{"scope": g["scope"], "spans": g["spans"]}],
             **({"schemaUrl": g["schemaUrl"]} if "schemaUrl" in g else {})}
            for g in groups.values()
        ]
    }  # fmt: skip
