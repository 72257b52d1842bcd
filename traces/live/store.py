"""Received spans stored before the receiver answers: one transaction per request, a span
already stored (the exporter resent its batch) is not stored again, and a trace that was
assembled opens again when a new span of it comes (traces.live.assembly decides what to do)."""

from __future__ import annotations

import orjson
from django.db import connection, transaction
from django.utils import timezone

from traces.live.otlp import Received
from traces.models import Project

_UPSERT_TRACES = """
INSERT INTO traces_livetrace (project_id, otel_trace_id, state, n_spans, first_span_at, last_span_at, root_ended,
                              changed_after_labelling, error)
SELECT %s, t, 'open', 0, %s, %s, false, false, '' FROM unnest(%s::text[]) AS t
ON CONFLICT (project_id, otel_trace_id) DO UPDATE SET project_id = EXCLUDED.project_id
RETURNING id, otel_trace_id
"""
# one JSON document of every span (the server parses it once; a jsonb[] parameter would be sent as
# an array literal with every quote escaped, five times slower)
_INSERT_SPANS = """
INSERT INTO traces_livespan (live_id, span_id, received_at, body)
SELECT (s->>0)::bigint, s->>1, %s, s->2 FROM jsonb_array_elements(%s::jsonb) AS s
ON CONFLICT (live_id, span_id) DO NOTHING
RETURNING live_id
"""
_TOUCH = """
UPDATE traces_livetrace AS lt SET
    last_span_at = %s,
    n_spans = lt.n_spans + new.n,
    root_ended = lt.root_ended OR new.root_ended,
    state = CASE WHEN lt.state = 'failed' THEN 'open' WHEN lt.state = 'assembled' THEN 'open' ELSE lt.state END
FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::int[]) AS n, unnest(%s::bool[]) AS root_ended) AS new
WHERE lt.id = new.id
"""


def spans_store(*, project: Project, spans: list[Received]) -> int:
    """Stores the spans not stored yet; returns how many were new."""
    if not spans:
        return 0
    now = timezone.now()
    trace_ids = sorted({s.trace_id for s in spans})
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_UPSERT_TRACES, [project.pk, now, now, trace_ids])
        live_of = {t: pk for pk, t in cur.fetchall()}
        rows = [[live_of[s.trace_id], s.span_id, s.body] for s in spans]
        cur.execute(_INSERT_SPANS, [now, orjson.dumps(rows).decode()])
        new_per_live: dict[int, int] = {}
        for (live_id,) in cur.fetchall():
            new_per_live[live_id] = new_per_live.get(live_id, 0) + 1
        if new_per_live:
            ended_root = {live_of[s.trace_id] for s in spans if s.root and s.ended}
            ids = sorted(new_per_live)
            cur.execute(_TOUCH, [now, ids, [new_per_live[i] for i in ids], [i in ended_root for i in ids]])
    return sum(new_per_live.values())
