"""Is it still working? Each failure mode's and category's share per day or week.

A period holds the traces imported in it (for live traces: when they arrived); the shares are over
the traces of the period with labels from ``source`` (as an experiment's: agreed labels, one rater
or judge, or ``corrected:<judge id>``), each with its Wilson 95% interval, or, for a corrected
source, the judge's share corrected by the period's human sample (PPI) where the period has at least
two traces with agreed labels, else the judge's own share marked "not corrected". ``cohort`` narrows
the traces as an experiment's cohort does (``mas_name:ChatDev;meta.variant:v2``).

The blind rule applies through the analytics' label matrix. ``window_shares`` gives the same
figures over one time window: the alert rules' input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models import BigIntegerField
from django.db.models.functions import Cast, Extract, TruncDay, TruncWeek
from django.utils import timezone

from annotations.analytics.selectors import AGREED, LabelMatrix, label_matrix_cached
from annotations.analytics.stats import category_matrix
from annotations.experiments.corrected import PREFIX, aligned_human
from annotations.experiments.selectors import Cohort
from annotations.judge.live import human_sample_ids
from annotations.judge.prevalence import ppi_mean, wilson
from traces.models import Project, Trace

BUCKETS = {"day": TruncDay, "week": TruncWeek}
MIN_HUMAN = 2  # a period's human sample below this is not enough to correct the judge


@dataclass
class Labels:
    """The label matrix of a source with its categories, and the aligned agreed labels when the
    source is a corrected judge."""

    M: LabelMatrix
    C: np.ndarray
    label: str
    Y: np.ndarray | None = None  # agreed labels on M's rows (corrected source)
    Yc: np.ndarray | None = None


def source_labels(*, user, project: Project, source: str) -> Labels:
    corrected = source.startswith(PREFIX)
    M = label_matrix_cached(user=user, project=project, source=source.removeprefix(PREFIX))
    labels = Labels(M, category_matrix(M.X, M.column_categories, M.categories), M.source_label)
    if corrected:
        H = label_matrix_cached(user=user, project=project, source=AGREED)
        labels.Y = aligned_human(M, H, human_sample_ids(project=project))
        labels.Yc = category_matrix(labels.Y, M.column_categories, M.categories)
        labels.label = f"{M.source_label} corrected by the agreed labels"
    return labels


def _share(f: np.ndarray, y: np.ndarray | None) -> dict:
    """One column of one period: k/n with Wilson, or the PPI-corrected share."""
    known = ~np.isnan(f)
    k, n = int(np.sum(f[known] == 1)), int(known.sum())
    plain = {"k": k, "n": n, **wilson(k, n).as_dict()}
    if y is None:
        return plain
    yk = y[known]
    sample = ~np.isnan(yk)
    if int(sample.sum()) < MIN_HUMAN:
        return {**plain, "corrected": False, "n_human": int(sample.sum())}
    share = ppi_mean(yk[sample], f[known][sample], f[known][~sample])
    return {"k": None, "n": n, **share.as_dict(), "corrected": True, "n_human": int(sample.sum())}


def _block(F: np.ndarray, Y: np.ndarray | None, codes: list[str]) -> list[dict]:
    if Y is not None:
        return [{"code": c, **_share(F[:, i], Y[:, i])} for i, c in enumerate(codes)]
    present, known = np.sum(F == 1, axis=0), np.sum(~np.isnan(F), axis=0)  # every column at once
    return [{"code": c, "k": int(present[i]), "n": int(known[i]), **wilson(int(present[i]), int(known[i])).as_dict()}
            for i, c in enumerate(codes)]  # fmt: skip


def shares(labels: Labels, rows) -> tuple[list[dict], list[dict]]:
    """Per mode and per category, the share over ``rows`` (a boolean mask or an index of the
    matrix's rows)."""
    M = labels.M
    modes = _block(M.X[rows], None if labels.Y is None else labels.Y[rows], M.codes)
    cats = _block(labels.C[rows], None if labels.Yc is None else labels.Yc[rows], M.categories)
    return modes, cats


def _cohort_ids(project: Project, cohort: str):
    qs = Trace.objects.filter(project=project)
    if cohort.strip():
        qs = qs.filter(Cohort.parse(cohort, which="cohort").q)
    return qs


def rows_between(labels: Labels, project: Project, cohort: str, start: datetime, end: datetime) -> np.ndarray:
    """The matrix rows of the cohort's traces imported in [start, end)."""
    ids = _cohort_ids(project, cohort).filter(imported_at__gte=start, imported_at__lt=end).values_list("id", flat=True)
    return np.isin(labels.M.trace_ids, np.fromiter(ids, dtype=np.int64))


@dataclass
class Series:
    bucket: str
    source: str
    corrected: bool
    cohort: str
    codes: list[str]
    names: dict[str, str]
    categories: list[str]
    category_names: dict[str, str]
    periods: list[dict] = field(default_factory=list)


def failure_series(*, user, project: Project, source: str = AGREED, cohort: str = "", bucket: str = "week") -> Series:
    """The project's shares per period (module docstring); only periods with a labelled trace.
    One query gives each trace's period; the matrix's rows are grouped by it with numpy."""
    if bucket not in BUCKETS:
        raise ValidationError({"bucket": f"use one of {', '.join(BUCKETS)}"})
    labels = source_labels(user=user, project=project, source=source)
    M = labels.M
    epoch = Cast(Extract(BUCKETS[bucket]("imported_at"), "epoch"), BigIntegerField())
    dated = np.array(list(_cohort_ids(project, cohort).annotate(period=epoch).order_by("id")
                          .values_list("id", "period")), dtype=np.int64).reshape(-1, 2)  # fmt: skip
    series = Series(bucket, labels.label, labels.Y is not None, cohort, M.codes, M.names, M.categories,
                    M.category_names)  # fmt: skip
    if not len(dated) or not len(M.trace_ids):
        return series
    ids, epochs = dated[:, 0], dated[:, 1]
    starts, period_of_id = np.unique(epochs, return_inverse=True)
    at = np.minimum(np.searchsorted(ids, M.trace_ids), len(ids) - 1)  # each matrix row's trace in ``ids``
    row_period = np.where(ids[at] == M.trace_ids, period_of_id[at], -1)
    order = np.argsort(row_period, kind="stable")
    bounds = np.searchsorted(row_period[order], np.arange(len(starts) + 1))
    for i, start in enumerate(starts):
        rows = order[bounds[i] : bounds[i + 1]]
        if not len(rows):
            continue  # traces of this period, none labelled by this source
        modes, cats = shares(labels, rows)
        day = timezone.localtime(datetime.fromtimestamp(int(start), tz=UTC)).date()
        series.periods.append({"start": day.isoformat(), "traces": int(len(rows)), "modes": modes, "categories": cats})
    return series


def series_as_dict(series: Series) -> dict[str, Any]:
    return {
        "bucket": series.bucket,
        "source": series.source,
        "corrected": series.corrected,
        "cohort": series.cohort or None,
        "modes": [{"code": c, "name": series.names.get(c, "")} for c in series.codes],
        "categories": [{"code": c, "name": series.category_names.get(c, "")} for c in series.categories],
        "periods": series.periods,
    }
