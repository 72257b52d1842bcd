"""Did the fix work? Two cohorts of a project's traces compared per failure mode and category.

A cohort is written as conditions joined by ``;`` (all must hold), each one of:

* ``mas_name:ChatDev``, ``llm_name:gpt-4o``, ``benchmark:ProgramDev``: a trace column's value;
* ``meta.KEY:VALUE``: a key of the trace's metadata (what an import or an OTel resource carried:
  ``meta.variant:v2``, ``meta.prompt_version:3``), compared as text;
* ``imported:2026-11-01..2026-12-01``: imported on or after the first day and before the second
  (either side may be empty: ``imported:..2026-12-01``).

The labels are those of ``source``: the agreed labels of closed rounds (default), one rater or
judge the user may see, or ``corrected:<judge rater id>``, that judge corrected by the agreed
labels (``corrected.py``); through the analytics' label matrix, so the blind rule applies as it
does on the dashboard. A trace that falls in both cohorts is left out of both and counted
(independent samples). The same task in both cohorts (the trace's task text, when it has one)
gives the paired analysis. The statistics are ``annotations.experiments.stats``.

Each mode and category row carries its taxonomy version's "what to try" note (the mode's own, or
its category's), which the page shows beside a mode that moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Q
from django.db.models.functions import MD5
from django.utils import timezone

from annotations.analytics.selectors import AGREED, FILTER_FIELDS, dashboard_sources, label_matrix_cached
from annotations.analytics.stats import CORRECTIONS, category_matrix, p_adjust
from annotations.experiments import stats
from annotations.experiments.corrected import ASSUMPTION, PREFIX, corrected_rows
from annotations.judge.live import human_sample_ids
from annotations.judge.prevalence import wilson
from annotations.models import Rater
from taxonomy.models import Category, FailureMode
from traces.models import Project, Trace

_META_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class Cohort:
    spec: str
    q: Q

    @classmethod
    def parse(cls, spec: str, *, which: str) -> Cohort:
        """Raises ValidationError saying which condition of cohort ``which`` it cannot read."""
        spec = (spec or "").strip()
        if not spec:
            raise ValidationError({which: "choose the traces of this cohort, e.g. mas_name:ChatDev"})
        q = Q()
        for part in (p.strip() for p in spec.split(";")):
            key, sep, value = part.partition(":")
            if not sep:
                raise ValidationError({which: f"{part!r}: write field:value (e.g. mas_name:ChatDev)"})
            if key in FILTER_FIELDS:
                q &= Q(**{key: value})
            elif key.startswith("meta."):
                name = key.removeprefix("meta.")
                if not _META_KEY.match(name):
                    raise ValidationError({which: f"{key!r}: a metadata key is letters, digits, _ . - (at most 100)"})
                q &= Q(**{f"metadata__{name}__iexact": value}) if value else Q(**{f"metadata__{name}__isnull": True})
            elif key == "imported":
                q &= _date_range(value, which)
            else:
                known = ", ".join([*FILTER_FIELDS, "meta.KEY", "imported"])
                raise ValidationError({which: f"{key!r}: unknown field (known: {known})"})
        return cls(spec, q)


def _date_range(value: str, which: str) -> Q:
    start, sep, end = value.partition("..")
    if not sep:
        raise ValidationError({which: f"imported:{value}: write imported:FIRST..BEFORE (YYYY-MM-DD, one may be empty)"})
    q = Q()
    for text, lookup in ((start, "imported_at__gte"), (end, "imported_at__lt")):
        if text.strip():
            try:
                day = date.fromisoformat(text.strip())
            except ValueError:
                raise ValidationError({which: f"{text!r}: not a date (YYYY-MM-DD)"}) from None
            q &= Q(**{lookup: timezone.make_aware(datetime.combine(day, time.min))})
    return q


@dataclass
class Experiment:
    a: str
    b: str
    source: str
    correction: str
    n_a: int
    n_b: int
    n_both: int  # traces in both cohorts, left out of both
    n_paired: int  # tasks with a trace in each cohort
    modes: list[dict] = field(default_factory=list)
    categories: list[dict] = field(default_factory=list)
    success: dict = field(default_factory=dict)
    corrected: bool = False
    caveat: str = ""


def _share(k: int, n: int) -> dict:
    return {"k": k, **wilson(k, n).as_dict()}


def _compare(name: str, label: str, ka: int, na: int, kb: int, nb: int, counted: str = "this mode labelled") -> dict:
    diff = stats.cohort_difference(ka, na, kb, nb, counted=counted)
    a_share = ka / na if na else None
    return {
        "code": name,
        "name": label,
        "a": _share(ka, na),
        "b": _share(kb, nb),
        "difference": diff.as_dict(),
        "p_adjusted": None,
        "min_detectable": stats.minimum_detectable_change(a_share, na, nb) if a_share is not None else None,
    }


def _columns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column: traces with the mode present, traces where it is known."""
    return np.nansum(X == 1, axis=0).astype(int), np.sum(~np.isnan(X), axis=0).astype(int)


def _notes(rows: list[dict], categories: list[dict], version_id: int | None, column_categories: list[str]) -> None:
    """Each row's "what to try": the mode's own note on the version, else its category's."""
    cat_notes = dict(Category.objects.filter(version_id=version_id).values_list("code", "what_to_try"))
    mode_notes = dict(FailureMode.objects.filter(version_id=version_id).values_list("code", "what_to_try"))
    for row, cat in zip(rows, column_categories, strict=True):
        row["what_to_try"] = mode_notes.get(row["code"]) or cat_notes.get(cat) or ""
    for row in categories:
        row["what_to_try"] = cat_notes.get(row["code"]) or ""


def _adjust(rows: list[dict], method: str) -> None:
    tested = [r for r in rows if r["difference"]["p_value"] is not None]
    if tested:
        adjusted = p_adjust(np.array([r["difference"]["p_value"] for r in tested]), method)
        for r, p in zip(tested, adjusted, strict=True):
            r["p_adjusted"] = float(p)


def _task_pairs(project: Project, ca: Cohort, cb: Cohort) -> list[tuple[int, int]]:
    """(trace in A, trace in B) per task text found in both cohorts, the first trace of each side;
    joined in PostgreSQL on md5(task), so only the pairs cross the wire."""
    sides = []
    for cohort in (ca, cb):
        qs = Trace.objects.filter(cohort.q, project=project).exclude(task="").annotate(h=MD5("task"))
        sides.append(qs.values("id", "h").query.sql_with_params())
    (sql_a, params_a), (sql_b, params_b) = sides
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(a.id), MIN(b.id) FROM ({sql_a}) a JOIN ({sql_b}) b ON a.h = b.h GROUP BY a.h",  # noqa: S608
            [*params_a, *params_b],
        )
        return [(int(x), int(y)) for x, y in cursor.fetchall()]


def _paired(rows: list[dict], pairs: list[tuple[int, int]], Xa, ids_a, Xb, ids_b) -> int:
    """Adds the paired analysis to each mode row (tasks whose two traces are both labelled and in
    one cohort only); returns the number of such tasks."""
    at_a = {pk: i for i, pk in enumerate(ids_a.tolist())}
    at_b = {pk: j for j, pk in enumerate(ids_b.tolist())}
    rows_ij = [(at_a[x], at_b[y]) for x, y in pairs if x in at_a and y in at_b]
    ia = np.array([i for i, _ in rows_ij], dtype=int)
    jb = np.array([j for _, j in rows_ij], dtype=int)
    for m, row in enumerate(rows):
        xa, xb = (Xa[ia, m], Xb[jb, m]) if len(ia) else (np.zeros(0), np.zeros(0))
        known = ~(np.isnan(xa) | np.isnan(xb))
        p = stats.paired_difference(xa[known].astype(int).tolist(), xb[known].astype(int).tolist())
        row["paired"] = {"n": p.n, "a_only": p.a_only, "b_only": p.b_only, "difference": p.difference,
                         "low": p.low, "high": p.high, "p_value": p.p_value, "undefined": p.undefined}  # fmt: skip
    return len(rows_ij)


def experiment_compare(
    *, user, project: Project, a: str, b: str, source: str = AGREED, correction: str = "holm"
) -> Experiment:
    """Cohort ``a`` against cohort ``b`` (module docstring) on the project's working version."""
    if correction not in CORRECTIONS:
        raise ValidationError({"correction": f"use one of {', '.join(CORRECTIONS)}"})
    ca, cb = Cohort.parse(a, which="a"), Cohort.parse(b, which="b")
    corrected = source.startswith(PREFIX)
    M = label_matrix_cached(user=user, project=project, source=source.removeprefix(PREFIX))
    in_a = set(Trace.objects.filter(ca.q, project=project).values_list("pk", flat=True))
    in_b = set(Trace.objects.filter(cb.q, project=project).values_list("pk", flat=True))
    both = in_a & in_b
    ids = M.trace_ids
    mask_a = np.isin(ids, list(in_a - both))
    mask_b = np.isin(ids, list(in_b - both))
    Xa, Xb = M.X[mask_a], M.X[mask_b]
    exp = Experiment(a, b, M.source_label, correction, int(mask_a.sum()), int(mask_b.sum()),
                     int(np.isin(ids, list(both)).sum()), 0)  # fmt: skip
    if corrected:
        H = label_matrix_cached(user=user, project=project, source=AGREED)
        exp.source, exp.corrected, exp.caveat = f"{M.source_label} corrected by the agreed labels", True, ASSUMPTION
        exp.modes, exp.categories = corrected_rows(M, H, mask_a, mask_b, human_sample_ids(project=project))
    else:
        (ka, na), (kb, nb) = _columns(Xa), _columns(Xb)
        exp.modes = [_compare(c, M.names.get(c, ""), int(ka[i]), int(na[i]), int(kb[i]), int(nb[i]))
                     for i, c in enumerate(M.codes)]  # fmt: skip
        exp.n_paired = _paired(exp.modes, _task_pairs(project, ca, cb), Xa, ids[mask_a], Xb, ids[mask_b])
        Ca = category_matrix(Xa, M.column_categories, M.categories)
        Cb = category_matrix(Xb, M.column_categories, M.categories)
        (cka, cna), (ckb, cnb) = _columns(Ca), _columns(Cb)
        exp.categories = [_compare(c, M.category_names.get(c, ""), int(cka[i]), int(cna[i]), int(ckb[i]),
                                   int(cnb[i])) for i, c in enumerate(M.categories)]  # fmt: skip
    _adjust(exp.modes, CORRECTIONS[correction])
    _adjust(exp.categories, CORRECTIONS[correction])
    _notes(exp.modes, exp.categories, project.taxonomy_version_id, M.column_categories)
    sa, sb = M.success[mask_a], M.success[mask_b]
    exp.success = _compare("success", "task succeeded", int(np.nansum(sa == 1)), int(np.sum(~np.isnan(sa))),
                           int(np.nansum(sb == 1)), int(np.sum(~np.isnan(sb))), "a known outcome")  # fmt: skip
    return exp


def experiment_sources(*, user, project: Project) -> list[tuple[str, str]]:
    """The dashboard's label sources, then each judge or baseline the user may see corrected by the
    agreed labels (``corrected:<rater id>``)."""
    plain = dashboard_sources(user=user, project=project)
    ids = [int(value) for value, _ in plain if value != AGREED]
    judges = Rater.objects.filter(pk__in=ids).exclude(kind__in=[Rater.Kind.HUMAN, Rater.Kind.IMPORTED])
    return plain + [
        (f"{PREFIX}{pk}", f"{name}, corrected by the agreed labels (PPI)")
        for pk, name in judges.order_by("name").values_list("pk", "name")
    ]


def experiment_as_dict(exp: Experiment) -> dict[str, Any]:
    return {
        "a": exp.a,
        "b": exp.b,
        "source": exp.source,
        "corrected": exp.corrected,
        "caveat": exp.caveat or None,
        "correction": exp.correction,
        "n_a": exp.n_a,
        "n_b": exp.n_b,
        "n_in_both_left_out": exp.n_both,
        "n_paired_tasks": exp.n_paired,
        "modes": exp.modes,
        "categories": exp.categories,
        "task_success": exp.success,
    }
