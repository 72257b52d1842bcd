"""The baseline run (writes): train the offline classifier on the project's labels, label every trace.

A baseline run is one task (``judge_run_start``), not one per trace: it gathers training labels
(``baseline_training_data``: the agreed labels of closed rounds when there are enough, else the
labels of a rater), fits the pure model (``providers/baseline_model.py``) and writes each pending
item's answer in batches, under the run's row lock. Idempotent: done items are skipped, so a
restarted task (the sweep restarts a run silent for ``dispatch.BASELINE_STALE``) finishes the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from annotations.judge.dispatch import CELERY, Dispatcher, judge_run_dispatch, run_stop
from annotations.judge.providers import baseline_model, provider_get
from annotations.judge.selectors import trace_texts
from annotations.judge.worker import rater_for
from annotations.labels.bulk import machine_annotation_upsert
from annotations.models import JudgeItem, JudgeRun, ModeLabel, Rater
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Project

BASELINE_MIN_TRACES = 10


def baseline_training_data(
    *, project: Project, version: TaxonomyVersion, source: str = "auto"
) -> tuple[str, list[int], np.ndarray, list[str]]:
    """(description, trace ids, traces x modes labels, codes) from agreed labels or a rater's labels."""
    from annotations.rounds.agreed import agreed_labels

    codes = [m.code for m in version_modes(version=version)]
    col = {c: j for j, c in enumerate(codes)}

    def matrix(rows: dict[int, dict[str, int]]) -> tuple[list[int], np.ndarray]:
        ids = sorted(rows)
        y = np.full((len(ids), len(codes)), np.nan)
        for i, t in enumerate(ids):
            for code, v in rows[t].items():
                if code in col:
                    y[i, col[code]] = v
        return ids, y

    agreed_rows: dict[int, dict[str, int]] = {}
    if source in ("auto", "agreed"):
        for a in agreed_labels(project=project, taxonomy_version=version):
            agreed_rows.setdefault(a.trace_id, {})[a.mode_code] = int(a.decision == "present")
        if len(agreed_rows) >= BASELINE_MIN_TRACES or (source == "agreed" and agreed_rows):
            ids, y = matrix(agreed_rows)
            return f"agreed labels of {project.slug}", ids, y, codes
        if source == "agreed":
            raise ValidationError("The project has no agreed labels (closed rounds) to train the baseline on.")
    if source.startswith("rater:"):
        rater = Rater.objects.filter(pk=int(source.split(":", 1)[1])).first()
        if rater is None:
            raise ValidationError(f"No rater {source}.")
    else:
        # Fewer than BASELINE_MIN_TRACES agreed traces: the imported rater with the most labelled
        # traces in the project, unless the agreed labels cover at least as many traces.
        rater = (
            Rater.objects.filter(
                kind=Rater.Kind.IMPORTED,
                annotations__trace__project=project,
                annotations__state="submitted",
                annotations__taxonomy_version=version,
            )
            .annotate(n=Count("annotations__trace", distinct=True))
            .order_by("-n", "name")
            .first()
        )
        if agreed_rows and (rater is None or rater.n <= len(agreed_rows)):
            ids, y = matrix(agreed_rows)
            return f"agreed labels of {project.slug}", ids, y, codes
        if rater is None:
            raise ValidationError(
                "Nothing to train the baseline on: no agreed labels (closed rounds) and no imported rater's labels."
            )
    rows = {}
    for tid, code, decision in (
        ModeLabel.objects.filter(
            annotation__rater=rater,
            annotation__trace__project=project,
            annotation__taxonomy_version=version,
            annotation__state="submitted",
        )
        .exclude(decision="unsure")
        .values_list("annotation__trace_id", "mode__code", "decision")
    ):
        rows.setdefault(tid, {})[code] = int(decision == "present")
    ids, y = matrix(rows)
    return rater.name, ids, y, codes


def baseline_run_execute(
    *,
    run_id: int,
    batch: int = 100,
    progress: Callable[[int], None] | None = None,
    dispatcher: Dispatcher = CELERY,
) -> JudgeRun:
    """Train the per-mode classifiers and label every pending item of a baseline run (idempotent)."""
    run = JudgeRun.objects.select_related("project", "taxonomy_version").get(pk=run_id)
    if run.state != JudgeRun.State.RUNNING:
        return run
    version = run.taxonomy_version
    try:
        source, train_ids, y, codes = baseline_training_data(
            project=run.project, version=version, source=run.selection.get("baseline_source", "auto")
        )
        texts = trace_texts(train_ids)
        model = baseline_model.train([texts[t] for t in train_ids], y, codes)
    except (ValidationError, ValueError) as exc:
        msg = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        run_stop(run_id=run.pk, message=f"The baseline could not be trained: {msg}")
        return JudgeRun.objects.get(pk=run.pk)
    provider = provider_get(run.provider)
    name = provider.rater_name(model=baseline_model.NAME, trained_on=source)
    rater = rater_for(
        kind=provider.rater_kind,
        name=name,
        description=f"Baseline classifier (not an LLM): {model.report()['classifier']}, trained on {source}.",
    )
    info = {**model.report(), "trained_on": source, "training_trace_ids": train_ids[:5000]}
    JudgeRun.objects.filter(pk=run.pk).update(rater=rater, baseline_info=info, model=baseline_model.NAME)
    run.rater, run.baseline_info = rater, info
    modes = {m.code: m for m in version_modes(version=version)}
    training = set(train_ids)
    while True:
        items = list(
            JudgeItem.objects.filter(run=run, state__in=[JudgeItem.State.PENDING, JudgeItem.State.RUNNING]).order_by(
                "id"
            )[:batch]
        )
        if not items or not JudgeRun.objects.filter(pk=run.pk, state=JudgeRun.State.RUNNING).exists():
            break
        texts = trace_texts([i.trace_id for i in items])
        started = time.monotonic()
        proba = model.predict_proba([texts[i.trace_id] for i in items])
        latency = int((time.monotonic() - started) * 1000 / max(1, len(items)))
        with transaction.atomic():
            JudgeRun.objects.select_for_update().filter(pk=run.pk).first()
            for item, row in zip(items, proba, strict=True):
                locked = JudgeItem.objects.select_for_update().get(pk=item.pk)
                if locked.state in (JudgeItem.State.DONE, JudgeItem.State.FAILED):
                    continue
                parsed = {
                    "task_success": "unknown",
                    "modes": [
                        {"code": c, "present": bool(p >= 0.5), "probability": round(float(p), 4)}
                        for c, p in zip(codes, row, strict=True)
                    ],
                    "in_training_set": item.trace_id in training,
                }
                labels = [
                    (
                        modes[c].pk,
                        "present" if p >= 0.5 else "absent",
                        [],
                        f"baseline classifier: p(present) = {p:.2f}",
                        round(float(p), 4),
                    )
                    for c, p in zip(codes, row, strict=True)
                ]
                source_json = {
                    "run": run.pk,
                    "item": item.pk,
                    "provider": "baseline",
                    "model": name,
                    "tokens_in": 0,
                    "tokens_out": 0,
                    "latency_ms": latency,
                    "cost": "0",
                    "in_training_set": item.trace_id in training,
                }
                ann_id = machine_annotation_upsert(
                    trace_id=item.trace_id,
                    rater_id=rater.pk,
                    version_id=version.pk,
                    task_success="unknown",
                    source=source_json,
                    labels=labels,
                )
                JudgeItem.objects.filter(pk=item.pk).update(
                    state=JudgeItem.State.DONE,
                    parsed=parsed,
                    raw_answer=json.dumps(parsed),
                    latency_ms=latency,
                    annotation_id=ann_id,
                    finished_at=timezone.now(),
                    lease_until=None,
                    attempts=F("attempts") + 1,
                )
            JudgeRun.objects.filter(pk=run.pk).update(n_done=run.items.filter(state=JudgeItem.State.DONE).count())
        if progress:
            progress(len(items))
    judge_run_dispatch(run_id=run.pk, dispatcher=dispatcher)  # finishes the run when nothing is left
    return JudgeRun.objects.get(pk=run.pk)
