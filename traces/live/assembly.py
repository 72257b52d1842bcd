"""Live traces become traces: once a trace's root span has ended and no span of it came for
``MAST_LIVE_QUIET_SECONDS``, its stored spans are written as one OTLP/JSON document and imported
with the file importer (``traces_import``, format ``otlp``): the same readers (GenAI and
OpenInference conventions, agents, tool calls, the span tree), the same report and hooks.

A span that comes after that opens the live trace again (``store.py``); at the next assembly a
trace nobody has labelled is replaced by the new import, a labelled one is kept as it is and
marked ``changed_after_labelling`` (the new spans are stored, nothing is lost). A trace the reader
refuses is marked failed with the reader's message, its spans kept; a new span tries again.

One process assembles one live trace at a time (its row is locked, others skip it); the import
runs in the same transaction, so a killed worker leaves the live trace open with its spans, and
the next sweep assembles it.
"""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.live.hooks import live_trace_new
from traces.live.otlp import document
from traces.models import LiveTrace, Trace, TraceSource

logger = logging.getLogger(__name__)
BATCH = 200


def _labelled(trace_id: int) -> bool:
    from django.apps import apps

    Annotation = apps.get_model("annotations", "Annotation")  # traces does not import annotations
    return Annotation.objects.filter(trace_id=trace_id).exists()


def _stored_as(live: LiveTrace, result, upload_name: str) -> Trace | None:
    """The trace the import stored the live trace as: a new trace; or, when its text equals a
    stored trace's (two identical runs), that trace, which keeps the live one as another source
    (traces.importing.merge); or the trace already stored with the same identity (the trace id)."""
    if result.trace_ids:
        return Trace.objects.filter(pk__in=result.trace_ids).order_by("pk").first()
    source = TraceSource.objects.filter(trace__project=live.project, source_file=upload_name).order_by("-pk").first()
    if source is not None:
        return source.trace
    return Trace.objects.filter(project=live.project, external_id=live.otel_trace_id).order_by("pk").first()


def live_trace_assemble(*, live_id: int) -> LiveTrace | None:
    """Assemble one open live trace now (the sweep calls it for the traces due, ``live_flush`` for
    every open one); None when another process has it or it is not open."""
    with transaction.atomic():
        live = (
            LiveTrace.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("project")
            .filter(pk=live_id, state=LiveTrace.State.OPEN)
            .first()
        )
        if live is None:
            return None
        now = timezone.now()
        old = Trace.objects.filter(pk=live.trace_id).first() if live.trace_id else None
        if old and _labelled(old.pk):
            live.state, live.changed_after_labelling, live.assembled_at = LiveTrace.State.ASSEMBLED, True, now
            live.save(update_fields=["state", "changed_after_labelling", "assembled_at"])
            return live
        bodies = list(live.spans.order_by("id").values_list("body", flat=True))
        upload = io.BytesIO(json.dumps(document(bodies)).encode())
        upload.name = f"otlp-live-{live.otel_trace_id}.json"
        try:
            with transaction.atomic():  # a refused import rolls back alone; the live trace records why
                if old:
                    old.delete()  # nobody labelled it: the new import replaces it
                result = traces_import(project=live.project, paths_or_files=[upload], format="otlp")
        except TraceImportError as exc:
            live.state, live.error = LiveTrace.State.FAILED, str(exc)[:2000]
            live.save(update_fields=["state", "error"])
            return live
        first_time = old is None
        live.trace = _stored_as(live, result, upload.name)
        if live.trace is not None and first_time and live.trace.pk in result.trace_ids:
            live_trace_new(live=live, trace=live.trace)  # the live policy draws it (annotations.judge.live)
        if live.trace is None:
            live.state, live.error = LiveTrace.State.FAILED, "; ".join(result.errors) or "the import stored no trace"
        else:
            live.state, live.error = LiveTrace.State.ASSEMBLED, ""
        live.assembled_at = now
        live.save(update_fields=["trace", "state", "error", "assembled_at"])
        return live


def live_flush(*, project) -> list[LiveTrace]:
    """Assemble every open live trace of ``project`` now, without waiting for its quiet period (an
    explicit flush); the live traces this process assembled."""
    opened = list(LiveTrace.objects.filter(project=project, state=LiveTrace.State.OPEN).values_list("pk", flat=True))
    return [live for live in (live_trace_assemble(live_id=pk) for pk in opened) if live is not None]


def live_assemble_due(*, now=None) -> int:
    """Assemble the live traces whose quiet period is over (at most BATCH per call); returns how many."""
    now = now or timezone.now()
    quiet = timedelta(seconds=settings.MAST_LIVE_QUIET_SECONDS)
    due = list(
        LiveTrace.objects.filter(state=LiveTrace.State.OPEN, root_ended=True, last_span_at__lt=now - quiet)
        .order_by("last_span_at")
        .values_list("pk", flat=True)[:BATCH]
    )
    done = 0
    for pk in due:
        try:
            done += live_trace_assemble(live_id=pk) is not None
        except Exception:
            logger.exception("live trace %s: assembly failed; the next sweep tries again", pk)
    return done
