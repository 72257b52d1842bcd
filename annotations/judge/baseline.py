"""The baseline run (writes): train the offline classifier on the project's labels, label every trace.

A baseline run is one task (``judge_run_start``), not one per trace: it gathers training labels
(``baseline_training_data``: every agreed label of closed rounds carried onto the run's version
through the mappings, ``agreed_labels_on_version``, when there are enough, else the labels of a
rater), fits the pure model (``providers/baseline_model.py``) and writes each pending item's
answer in batches, under the run's row lock. The answer for a training trace is cross-fitted
(``baseline_model.cross_fit``: predicted by the model of the other folds, which never saw it), so
every score read from the run's labels (judge quality, Compare judges, corrected shares) is
honest; other traces get the model fitted on all training traces. Idempotent: done items are skipped, so a
restarted task (the sweep restarts a run as soon as its lock, `dispatch.whole_run_lock`, is free:
its worker died) finishes the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
from annotations.rounds.agreed import agreed_labels_on_version
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Project

BASELINE_MIN_TRACES = 10
CROSS_FIT_SEED = 0


@dataclass
class TrainingData:
    """What a baseline trains on (``baseline_training_data``).

    ``labels``: traces x modes, 1 present / 0 absent / NaN unlabelled or undecided. From agreed
    labels: ``mapping`` is ``agreed_labels_on_version``'s per-source-version summary, ``n_mapped``
    how many labels of other versions' rounds it carried onto the version (its "mapped" counts),
    ``n_recoded`` how many training labels ended under another code than they were given (a
    rename, a split's decided half), ``unknown`` per
    target mode how many training traces a label reached that the mapping could not decide (left
    NaN: not trained on, never guessed)."""

    source: str
    trace_ids: list[int]
    labels: np.ndarray
    codes: list[str]
    mapping: list[dict] = field(default_factory=list)
    n_mapped: int = 0
    n_recoded: int = 0
    unknown: dict[str, int] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "n_mapped": self.n_mapped,
            "n_recoded": self.n_recoded,
            "unknown": self.unknown,
        }


def _label_matrix(rows: dict[int, dict[str, int]], codes: list[str]) -> tuple[list[int], np.ndarray]:
    """Traces (sorted ids) by modes (``codes``): 1 present, 0 absent, NaN where nothing was decided."""
    col = {c: j for j, c in enumerate(codes)}
    ids = sorted(rows)
    y = np.full((len(ids), len(codes)), np.nan)
    for i, t in enumerate(ids):
        for code, v in rows[t].items():
            if code in col:
                y[i, col[code]] = v
    return ids, y


def _from_agreed(project: Project, agreed: Any, rows: dict[int, dict[str, int]], codes: list[str]) -> TrainingData:
    """The agreed labels as training data, with what the mappings carried and what they could not."""
    ids, y = _label_matrix(rows, codes)
    unknown: dict[str, int] = {}
    for tid in ids:
        for code in agreed.unknown.get(tid, ()):
            unknown[code] = unknown.get(code, 0) + 1
    n_mapped = sum(row["mapped"] for row in agreed.mapping if not row["is_target"])
    n_recoded = sum(1 for t in ids for b in agreed.basis.get(t, {}).values() if b == "mapped")
    return TrainingData(
        f"agreed labels of {project.slug}",
        ids,
        y,
        codes,
        mapping=agreed.mapping,
        n_mapped=n_mapped,
        n_recoded=n_recoded,
        unknown=dict(sorted(unknown.items())),
    )


def _busiest_imported_rater(*, project: Project, version: TaxonomyVersion) -> Rater | None:
    """The imported rater with the most labelled traces of the project on ``version`` (``n`` annotated)."""
    return (
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


def _rater_rows(*, rater: Rater, project: Project, version: TaxonomyVersion) -> dict[int, dict[str, int]]:
    """A rater's submitted present/absent labels by trace (unsure is no training label)."""
    rows: dict[int, dict[str, int]] = {}
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
    return rows


def baseline_training_data(*, project: Project, version: TaxonomyVersion, source: str = "auto") -> TrainingData:
    """The labels to train on: every agreed label carried onto ``version`` (closed rounds of any
    version, through the recorded mappings) when there are enough, else a rater's labels."""
    codes = [m.code for m in version_modes(version=version)]
    agreed: Any = None
    agreed_rows: dict[int, dict[str, int]] = {}
    if source in ("auto", "agreed"):
        agreed = agreed_labels_on_version(project=project, target=version)
        # a trace whose every label the mapping left undecided has nothing to train on
        agreed_rows = {t: values for t, values in agreed.labels.items() if values}
        if len(agreed_rows) >= BASELINE_MIN_TRACES or (source == "agreed" and agreed_rows):
            return _from_agreed(project, agreed, agreed_rows, codes)
        if source == "agreed":
            raise ValidationError(
                f"The project has no agreed labels (closed rounds) on {version.label}, or mapped onto it, "
                "to train the baseline on."
            )
    if source.startswith("rater:"):
        rater = Rater.objects.filter(pk=int(source.split(":", 1)[1])).first()
        if rater is None:
            raise ValidationError(f"No rater {source}.")
    else:
        # Fewer than BASELINE_MIN_TRACES agreed traces: the imported rater with the most labelled
        # traces in the project, unless the agreed labels cover at least as many traces.
        rater = _busiest_imported_rater(project=project, version=version)
        if agreed_rows and (rater is None or rater.n <= len(agreed_rows)):  # type: ignore[attr-defined]
            return _from_agreed(project, agreed, agreed_rows, codes)
        if rater is None:
            raise ValidationError(
                f"Nothing to train the baseline on: no agreed labels (closed rounds) on {version.label} or "
                "mapped onto it, and no imported rater's labels on it."
            )
    ids, y = _label_matrix(_rater_rows(rater=rater, project=project, version=version), codes)
    return TrainingData(rater.name, ids, y, codes)


@dataclass
class _Trained:
    """What a baseline run labels with: the trained model, its cross-fit and the rater it writes as."""

    data: TrainingData
    model: Any
    crossed: Any
    rater: Rater
    name: str
    modes: dict[str, Any]

    @property
    def out_of_fold(self) -> dict[int, tuple[Any, int]]:
        """Each training trace's answer: from the model of the folds without it (1-based fold number)."""
        return {t: (self.crossed.proba[i], int(self.crossed.fold[i]) + 1) for i, t in enumerate(self.data.trace_ids)}


def _baseline_train(run: JudgeRun) -> _Trained | None:
    """Train and cross-fit the classifiers and record the rater and the training report on the run;
    None (the run stopped, saying why) when there is nothing to train on."""
    try:
        data = baseline_training_data(
            project=run.project, version=run.taxonomy_version, source=run.selection.get("baseline_source", "auto")
        )
        texts = trace_texts(data.trace_ids)
        train_texts = [texts[t] for t in data.trace_ids]
        model = baseline_model.train(train_texts, data.labels, data.codes)
        # each fold touches the run, so the sweep does not take a long cross-fit for a dead worker
        crossed = baseline_model.cross_fit(
            train_texts,
            data.labels,
            data.codes,
            seed=CROSS_FIT_SEED,
            on_fold=lambda _f: JudgeRun.objects.filter(pk=run.pk).update(updated_at=timezone.now()),
        )
    except (ValidationError, ValueError) as exc:
        msg = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        # A resume would train on the same labels and fail the same way: the run says so (no Resume).
        JudgeRun.objects.filter(pk=run.pk).update(baseline_info={"training_failed": msg})
        run_stop(run_id=run.pk, message=f"The baseline could not be trained: {msg}")
        return None
    provider = provider_get(run.provider)
    name = provider.rater_name(model=baseline_model.NAME, trained_on=data.source)
    rater = rater_for(
        kind=provider.rater_kind,
        name=name,
        description=f"Baseline classifier (not an LLM): {model.report()['classifier']}, trained on {data.source}.",
    )
    info = {
        **model.report(),
        "trained_on": data.source,
        "training_trace_ids": data.trace_ids[:5000],
        **data.info(),
        "scores": f"cross-fitted (k-fold, k={crossed.k})",
        "cross_fit": crossed.report(),
    }
    JudgeRun.objects.filter(pk=run.pk).update(rater=rater, baseline_info=info, model=baseline_model.NAME)
    run.rater, run.baseline_info = rater, info
    modes = {m.code: m for m in version_modes(version=run.taxonomy_version)}
    return _Trained(data, model, crossed, rater, name, modes)


def _baseline_item_write(
    *, run: JudgeRun, item: JudgeItem, trained: _Trained, row: Any, fold: int | None, latency: int
) -> None:
    """Store one item's answer (probabilities ``row``) as the baseline rater's annotation; ``fold``
    names the cross-fit model that answered for a training trace (None: the full model)."""
    codes, k = trained.data.codes, trained.crossed.k
    in_training = fold is not None
    how = (
        f"baseline classifier, cross-fitted (fold {fold} of {k}, a model that did not see this trace)"
        if in_training
        else "baseline classifier"
    )
    parsed: dict[str, Any] = {
        "task_success": "unknown",
        "modes": [
            {"code": c, "present": bool(p >= 0.5), "probability": round(float(p), 4)}
            for c, p in zip(codes, row, strict=True)
        ],
        "in_training_set": in_training,
    }
    if in_training:
        parsed |= {"cross_fitted": True, "fold": fold, "k": k}
    labels = [
        (
            trained.modes[c].pk,
            "present" if p >= 0.5 else "absent",
            [],
            f"{how}: p(present) = {p:.2f}",
            round(float(p), 4),
        )
        for c, p in zip(codes, row, strict=True)
    ]
    source_json = {
        "run": run.pk,
        "item": item.pk,
        "provider": "baseline",
        "model": trained.name,
        "tokens_in": 0,
        "tokens_out": 0,
        "latency_ms": latency,
        "cost": "0",
        "in_training_set": in_training,
        "cross_fitted": in_training,
    }
    ann_id = machine_annotation_upsert(
        trace_id=item.trace_id,
        rater_id=trained.rater.pk,
        version_id=run.taxonomy_version_id,
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
    trained = _baseline_train(run)
    if trained is None:
        return JudgeRun.objects.get(pk=run.pk)
    out_of_fold = trained.out_of_fold
    while True:
        items = list(
            JudgeItem.objects.filter(run=run, state__in=[JudgeItem.State.PENDING, JudgeItem.State.RUNNING]).order_by(
                "id"
            )[:batch]
        )
        if not items or not JudgeRun.objects.filter(pk=run.pk, state=JudgeRun.State.RUNNING).exists():
            break
        started = time.monotonic()
        fresh = [i for i in items if i.trace_id not in out_of_fold]
        full = {}
        if fresh:
            texts = trace_texts([i.trace_id for i in fresh])
            proba = trained.model.predict_proba([texts[i.trace_id] for i in fresh])
            full = dict(zip((i.pk for i in fresh), proba, strict=True))
        latency = int((time.monotonic() - started) * 1000 / max(1, len(items)))
        with transaction.atomic():
            JudgeRun.objects.select_for_update().filter(pk=run.pk).first()
            for item in items:
                locked = JudgeItem.objects.select_for_update().get(pk=item.pk)
                if locked.state in (JudgeItem.State.DONE, JudgeItem.State.FAILED):
                    continue
                row, fold = out_of_fold.get(item.trace_id) or (full[item.pk], None)
                _baseline_item_write(run=run, item=item, trained=trained, row=row, fold=fold, latency=latency)
            JudgeRun.objects.filter(pk=run.pk).update(n_done=run.items.filter(state=JudgeItem.State.DONE).count())
        if progress:
            progress(len(items))
    judge_run_dispatch(run_id=run.pk, dispatcher=dispatcher)  # finishes the run when nothing is left
    return JudgeRun.objects.get(pk=run.pk)
