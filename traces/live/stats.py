"""What the OTLP receiver took, per project and hour (``IngestStat``), and what the live-traces page
and API show: per hour the requests, spans acknowledged, new, rejected with the reasons, and traces
assembled; the lag from a trace's quiet period ending to it being listed; traces open or failed.

The counters are bumped in one statement after the spans' transaction has committed (so the row's
lock is held for microseconds, not for the request); a counter that cannot be written is logged and
the spans stay acknowledged: the counts are an account, not the record (the spans are).
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone

from traces.live.hooks import live_summary_extra
from traces.models import IngestStat, LiveTrace, Project

logger = logging.getLogger(__name__)

_BUMP = """
INSERT INTO traces_ingeststat AS s (project_id, hour, requests, refused_requests, spans_accepted, spans_new,
                               spans_rejected, reasons)
VALUES (%s, date_trunc('hour', now()), %s, %s, %s, %s, %s, %s::jsonb)
ON CONFLICT (project_id, hour) DO UPDATE SET
    requests = s.requests + EXCLUDED.requests,
    refused_requests = s.refused_requests + EXCLUDED.refused_requests,
    spans_accepted = s.spans_accepted + EXCLUDED.spans_accepted,
    spans_new = s.spans_new + EXCLUDED.spans_new,
    spans_rejected = s.spans_rejected + EXCLUDED.spans_rejected,
    reasons = CASE WHEN EXCLUDED.reasons = '{}'::jsonb THEN s.reasons ELSE (
        SELECT jsonb_object_agg(k, COALESCE((s.reasons->>k)::bigint, 0) + COALESCE((EXCLUDED.reasons->>k)::bigint, 0))
        FROM (SELECT jsonb_object_keys(s.reasons) UNION SELECT jsonb_object_keys(EXCLUDED.reasons)) AS keys(k)
    ) END
"""


def ingest_count(*, project_id: int, accepted: int = 0, new: int = 0, rejected: int = 0,
                 reasons: dict[str, int] | None = None, refused: str = "") -> None:  # fmt: skip
    """One request's account: its spans, or ``refused`` (why the whole request was)."""
    reasons = dict(reasons or {})
    if refused:
        reasons[refused] = reasons.get(refused, 0) + 1
    try:
        with connection.cursor() as cur:
            cur.execute(_BUMP, [project_id, 0 if refused else 1, 1 if refused else 0, accepted, new, rejected,
                                json.dumps(reasons)])  # fmt: skip
    except DatabaseError:
        logger.exception("OTLP receiver: the ingest counters of project %s could not be bumped", project_id)


def live_summary(*, project: Project, hours: int = 24) -> dict:
    """The page's and the API's figures over the last ``hours`` hours."""
    since = timezone.now() - timedelta(hours=hours)
    assembled = dict(
        LiveTrace.objects.filter(project=project, assembled_at__gte=since)
        .annotate(h=TruncHour("assembled_at"))
        .values_list("h")
        .annotate(n=Count("pk"))
        .values_list("h", "n")
    )
    rows = []
    stats = IngestStat.objects.filter(project=project, hour__gte=since - timedelta(hours=1)).order_by("-hour")
    counters = ("requests", "refused_requests", "spans_accepted", "spans_new", "spans_rejected")
    for stat in stats:
        rows.append({"hour": stat.hour.isoformat(), **{c: getattr(stat, c) for c in counters},
                     "reasons": stat.reasons, "traces_assembled": assembled.pop(stat.hour, 0)})  # fmt: skip
    for hour, n in assembled.items():  # assembled in an hour no span came
        rows.append({"hour": hour.isoformat(), **dict.fromkeys(counters, 0), "reasons": {}, "traces_assembled": n})
    rows.sort(key=lambda r: r["hour"], reverse=True)
    quiet = settings.MAST_LIVE_QUIET_SECONDS
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), "
            "percentile_cont(0.95) WITHIN GROUP (ORDER BY lag) FROM (SELECT extract(epoch FROM assembled_at - "
            "last_span_at) - %s AS lag FROM traces_livetrace WHERE project_id = %s AND assembled_at >= %s "
            "AND state = 'assembled') t WHERE lag >= 0",  # a flush before the quiet period ended is no lag
            [quiet, project.pk, since],
        )
        n, p50, p95 = cur.fetchone()
    states = dict(LiveTrace.objects.filter(project=project).values_list("state").annotate(n=Count("pk")))
    return {
        "hours": rows,
        "lag_seconds": {"traces": n, "p50": p50, "p95": p95, "after_quiet_period_of": quiet},
        "open": states.get("open", 0),
        "assembled": states.get("assembled", 0),
        "failed": states.get("failed", 0),
        "changed_after_labelling": LiveTrace.objects.filter(project=project, changed_after_labelling=True).count(),
        **live_summary_extra(project=project),  # the live judge's backlog (annotations.judge.live)
    }
