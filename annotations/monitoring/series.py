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
from datetime import datetime
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models.functions import TruncDay, TruncWeek

from annotations.analytics.selectors import AGREED, LabelMatrix, label_matrix
from annotations.analytics.stats import category_matrix
from annotations.experiments.corrected import PREFIX, aligned_human
from annotations.experiments.selectors import Cohort
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
    Y: np.ndarray | None = None  # agreed labels on M's rows (corrected source)
    Yc: np.ndarray | None = None


def source_labels(*, user, project: Project, source: str) -> Labels:
    corrected = source.startswith(PREFIX)
    M = label_matrix(user=user, project=project, source=source.removeprefix(PREFIX))
    labels = Labels(M, category_matrix(M.X, M.column_categories, M.categories))
    if corrected:
        H = label_matrix(user=user, project=project, source=AGREED)
        labels.Y = aligned_human(M, H)
        labels.Yc = category_matrix(labels.Y, M.column_categories, M.categories)
        M.source_label = f"{M.source_label} corrected by the agreed labels"
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


def shares(labels: Labels, rows: np.ndarray) -> tuple[list[dict], list[dict]]:
    """Per mode and per category, the share over ``rows`` (a boolean mask of the matrix's rows)."""
    M = labels.M
    modes = [
        {"code": c, **_share(M.X[rows, i], None if labels.Y is None else labels.Y[rows, i])}
        for i, c in enumerate(M.codes)
    ]
    cats = [
        {"code": c, **_share(labels.C[rows, i], None if labels.Yc is None else labels.Yc[rows, i])}
        for i, c in enumerate(M.categories)
    ]
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
    """The project's shares per period (module docstring); only periods with a labelled trace."""
    if bucket not in BUCKETS:
        raise ValidationError({"bucket": f"use one of {', '.join(BUCKETS)}"})
    labels = source_labels(user=user, project=project, source=source)
    M = labels.M
    dated = (
        _cohort_ids(project, cohort)
        .annotate(period=BUCKETS[bucket]("imported_at"))
        .values_list("id", "period")
    )
    at = {pk: i for i, pk in enumerate(M.trace_ids.tolist())}
    by_period: dict[datetime, list[int]] = {}
    for pk, period in dated.iterator(chunk_size=10_000):
        if pk in at:  # a trace without labels from this source is in no period's counts
            by_period.setdefault(period, []).append(at[pk])
    series = Series(bucket, M.source_label, labels.Y is not None, cohort, M.codes, M.names, M.categories,
                    M.category_names)  # fmt: skip
    for period in sorted(by_period):
        rows = np.zeros(len(M.trace_ids), dtype=bool)
        rows[by_period[period]] = True
        modes, cats = shares(labels, rows)
        series.periods.append(
            {"start": period.date().isoformat(), "traces": int(rows.sum()), "modes": modes, "categories": cats}
        )
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
