"""``POST /otlp/v1/traces``: the OTLP/HTTP receiver, so ``OTEL_EXPORTER_OTLP_ENDPOINT=<site>/otlp``
works unchanged.

Authenticated by a project's ingest key, as ``Authorization: Bearer <key>`` or ``X-Mast-Ingest-Key``
(``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<key>``). Answers as the OTLP specification
asks: 200 with an ExportTraceServiceResponse (a partial success names the rejected spans and why)
only once the spans are stored; 400 for a body it cannot read, 401 for a missing, unknown or
revoked key, 413 for a body over ``MAST_OTLP_MAX_BYTES`` (compressed or not), 415 for another
content type; 429 with ``Retry-After`` when a key sends more than ``MAST_OTLP_REQUESTS_PER_SECOND``
requests in a second, 503 with ``Retry-After`` when the database cannot take the spans now or more
than ``MAST_LIVE_MAX_BACKLOG`` traces wait to be assembled (the workers are not keeping up). The
exporters retry 429 and 503 after that time; a resent span is not stored twice. The body is read
to at most the limit, so memory per request is bounded.

Not a browser endpoint: no session, no cookies, so no CSRF token (the key is the credential).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from traces.live.keys import ingest_key_find
from traces.live.otlp import JSON, PROTOBUF, OtlpError, OtlpTooLarge, decode, error_body, gunzip, success_body
from traces.live.stats import ingest_count
from traces.live.store import spans_store
from traces.models import IngestKey, LiveTrace

logger = logging.getLogger(__name__)

# gRPC codes in google.rpc.Status bodies
INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE, UNAUTHENTICATED = 3, 8, 14, 16


def _answer(status: int, body: bytes, content_type: str, retry_after: int | None = None) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=content_type)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def _key_of(request) -> str:
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("X-Mast-Ingest-Key", "").strip()


def _over_rate(key: IngestKey) -> bool:
    second = int(timezone.now().timestamp())
    name = f"mast:otlp-rate:{key.pk}:{second}"
    cache.add(name, 0, timeout=5)
    try:
        return cache.incr(name) > settings.MAST_OTLP_REQUESTS_PER_SECOND
    except ValueError:  # expired between add and incr
        return False


def _backlogged(project_id: int) -> bool:
    """More live traces waiting to be assembled (quiet period over) than MAST_LIVE_MAX_BACKLOG: the
    workers are not keeping up, so the receiver asks exporters to wait (counted at most every 5 s)."""
    name = f"mast:otlp-backlog:{project_id}"
    waiting = cache.get(name)
    if waiting is None:
        quiet = timezone.now() - timedelta(seconds=settings.MAST_LIVE_QUIET_SECONDS)
        waiting = LiveTrace.objects.filter(project_id=project_id, state=LiveTrace.State.OPEN, root_ended=True,
                                           last_span_at__lt=quiet).count()  # fmt: skip
        cache.set(name, waiting, timeout=5)
    return waiting > settings.MAST_LIVE_MAX_BACKLOG


def _touch(key: IngestKey) -> None:
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        IngestKey.objects.filter(pk=key.pk).update(last_used_at=now)


@csrf_exempt
@require_POST
def otlp_traces(request) -> HttpResponse:
    kind = (request.content_type or "").lower()
    answer_type = PROTOBUF if kind == PROTOBUF else JSON
    if kind not in (PROTOBUF, JSON):
        body = error_body(INVALID_ARGUMENT, f"content type {kind or '(none)'!r}: send {PROTOBUF} or {JSON}", JSON)
        return _answer(415, body, JSON)
    key = ingest_key_find(_key_of(request))
    if key is None:
        message = "no valid ingest key: send Authorization: Bearer <key> (a project's key, not revoked)"
        return _answer(401, error_body(UNAUTHENTICATED, message, answer_type), answer_type)
    if _over_rate(key):
        ingest_count(project_id=key.project_id, refused="429: over the key's requests per second")
        message = f"more than {settings.MAST_OTLP_REQUESTS_PER_SECOND} requests per second on this key"
        return _answer(429, error_body(RESOURCE_EXHAUSTED, message, answer_type), answer_type, retry_after=1)
    if _backlogged(key.project_id):
        ingest_count(project_id=key.project_id, refused="503: the assembly is behind")
        message = "the traces received are waiting to be assembled; send again later"
        return _answer(503, error_body(UNAVAILABLE, message, answer_type), answer_type, retry_after=10)
    limit = settings.MAST_OTLP_MAX_BYTES
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > limit:
        ingest_count(project_id=key.project_id, refused="413: body too large")
        return _answer(413, error_body(INVALID_ARGUMENT, f"the body is over {limit:,} bytes", answer_type), answer_type)
    raw = request.read(limit + 1)
    try:
        if len(raw) > limit:
            raise OtlpTooLarge(f"the body is over {limit:,} bytes")
        if request.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gunzip(raw, limit)
        decoded = decode(raw, kind)
    except OtlpError as exc:
        status = 413 if isinstance(exc, OtlpTooLarge) else 400
        ingest_count(project_id=key.project_id, refused=f"{status}: {str(exc)[:80]}")
        return _answer(status, error_body(INVALID_ARGUMENT, str(exc), answer_type), answer_type)
    try:
        new = spans_store(project=key.project, spans=decoded.spans)
    except DatabaseError:
        logger.exception("OTLP receiver: could not store %s spans for project %s", len(decoded.spans), key.project_id)
        message = "the spans could not be stored now; send them again"
        return _answer(503, error_body(UNAVAILABLE, message, answer_type), answer_type, retry_after=5)
    ingest_count(project_id=key.project_id, accepted=len(decoded.spans), new=new, rejected=decoded.rejected,
                 reasons=decoded.reasons)  # fmt: skip
    _touch(key)
    return _answer(200, success_body(decoded, answer_type), answer_type)
