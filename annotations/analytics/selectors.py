"""Reads for the analytics dashboard: a compact trace x mode label matrix, aggregated in SQL.

Labels are folded per (trace, round) or per annotation into two integers in the database
(``present`` and ``known`` bit masks over the version's modes, ``SUM(CASE ...)``), so 10,000
traces x 14 modes arrive as ~10,000 small rows and become a numpy matrix without a Python loop
over labels. Labels of other taxonomy versions are carried to the project's version through
the recorded mode mapping.

Which labels: ``"agreed"`` = the consensus (Adjudication rows) of closed rounds, visible to every
member; or one rater's submitted labels, filtered through the blind rule
(``annotations_visible_to``), so a member only ever sees the raters they may see.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, Max, Q

from annotations.labels.visibility import annotations_visible_to
from annotations.models import Adjudication, Annotation, ModeLabel, Rater, Round
from annotations.releases.selectors import VersionMapper, mask_sum, version_modes
from taxonomy.models import Category, FailureMode, TaxonomyVersion
from traces.models import Project, Trace

AGREED = "agreed"
FETCH_ROWS = 20_000
FILTER_FIELDS = ("mas_name", "llm_name", "benchmark")


@dataclass
class LabelMatrix:
    codes: list[str]
    names: dict[str, str]
    column_categories: list[str]
    categories: list[str]
    category_names: dict[str, str]
    trace_ids: np.ndarray
    X: np.ndarray
    mas_name: np.ndarray
    llm_name: np.ndarray
    benchmark: np.ndarray
    steps: np.ndarray
    switches: np.ndarray
    repeated: np.ndarray
    success: np.ndarray  # 1 succeeded, 0 failed, NaN unknown
    n_mapped: int = 0
    source_label: str = "Agreed labels (closed rounds)"
    extra: dict = field(default_factory=dict)

    def subset(self, mask: np.ndarray) -> np.ndarray:
        return self.X[mask]


def dashboard_sources(*, user, project: Project) -> list[tuple[str, str]]:
    """Label sources the user may pick: agreed labels, then every rater with labels they may see."""
    visible = annotations_visible_to(user=user, project=project).filter(state=Annotation.State.SUBMITTED)
    raters = (
        Rater.objects.filter(id__in=visible.values("rater_id"))
        .order_by("kind", "name")
        .values_list("id", "name", "kind")
    )
    kinds = dict(Rater.Kind.choices)
    return [(AGREED, "Agreed labels (closed rounds)")] + [
        (str(rid), f"{name} ({kinds.get(kind, kind)})") for rid, name, kind in raters
    ]


def dashboard_filter_choices(*, project: Project) -> dict[str, list[str]]:
    """Distinct frameworks, LLMs and benchmarks of the project, in one query."""
    rows = (
        Trace.objects.filter(project=project)
        .values_list(*FILTER_FIELDS)
        .annotate(n=Count("id"))
        .order_by(*FILTER_FIELDS)
    )
    out: dict[str, set[str]] = {f: set() for f in FILTER_FIELDS}
    for row in rows:
        for f, v in zip(FILTER_FIELDS, row[:3], strict=True):
            if v:
                out[f].add(v)
    return {f: sorted(v) for f, v in out.items()}


def _mask_sums(modes: dict[int, list[tuple[int, str]]], *, all_known: bool = False) -> dict:
    """present / known bit masks; `all_known` where decisions can only be present or absent
    (Adjudication's check constraint), which saves a test per row."""
    return {
        "p": mask_sum(modes, decision="present"),
        "k": mask_sum(modes) if all_known else mask_sum(modes, decision__in=["present", "absent"]),
    }


def labels_fingerprint(*, user, project: Project, source: str, filters: dict | None = None) -> str:
    """Changes whenever the matrix `label_matrix` would return changes (labels, traces, visibility);
    two cheap aggregates, so the dashboard can cache per (project, filters, labels fingerprint)."""
    if source == AGREED:
        facts = Adjudication.objects.filter(round__project=project, round__state=Round.State.CLOSED).aggregate(
            n=Count("id"), at=Max("at"), closed=Max("round__closed_at")
        )
        who = "members"  # agreed labels of closed rounds are the same for every member
    else:
        facts = (
            annotations_visible_to(user=user, project=project)
            .filter(rater_id=int(source), state=Annotation.State.SUBMITTED)
            .aggregate(n=Count("id"), at=Max("updated_at"))
        )
        who = f"user{user.pk}"  # what a member may see of a rater depends on the member
    traces = Trace.objects.filter(project=project).aggregate(n=Count("id"), last=Max("id"))
    key = json.dumps(
        [project.pk, project.taxonomy_version_id, source, who, sorted((filters or {}).items()), facts, traces],
        default=str,
    )
    return hashlib.sha256(key.encode()).hexdigest()


def label_matrix(*, user, project: Project, source: str = AGREED, filters: dict | None = None) -> LabelMatrix:
    """The label matrix of the project's traces matching `filters`, from `source` (see module doc)."""
    target: TaxonomyVersion = project.taxonomy_version
    filters = {k: v for k, v in (filters or {}).items() if k in FILTER_FIELDS and v}
    trace_q = Q()
    for k, v in filters.items():
        trace_q &= Q(**{f"{k}__in": v})

    if source == AGREED:
        base = Adjudication.objects.filter(round__project=project, round__state=Round.State.CLOSED)
        if filters:
            base = base.filter(trace_id__in=Trace.objects.filter(trace_q, project=project).values("id"))
        versions = set(
            Round.objects.filter(project=project, state=Round.State.CLOSED).values_list(
                "taxonomy_version_id", flat=True
            )
        ) | {target.pk}
        modes = version_modes(versions)
        rows = list(
            base.values("round_id", "trace_id", "round__taxonomy_version_id")
            .annotate(**_mask_sums(modes, all_known=True), at=Max("round__closed_at"))
            .order_by()
            .values_list("trace_id", "round__taxonomy_version_id", "p", "k", "at", "round_id")
        )
        # ordered here, not in SQL: an ORDER BY before the GROUP BY would sort every label row
        rows = [r[:4] for r in sorted(rows, key=lambda r: (r[4], r[5]))]
        label = "Agreed labels (closed rounds)"
    else:
        try:
            rater_id = int(source)
        except ValueError:
            raise ValueError(f"unknown label source {source!r}") from None
        visible = annotations_visible_to(user=user, project=project).filter(
            rater_id=rater_id, state=Annotation.State.SUBMITTED
        )
        if filters:
            visible = visible.filter(trace_id__in=Trace.objects.filter(trace_q, project=project).values("id"))
        versions = set(visible.values_list("taxonomy_version_id", flat=True).distinct()) | {target.pk}
        modes = version_modes(versions)
        rows = list(
            ModeLabel.objects.filter(annotation__in=visible)
            .values("annotation_id", "annotation__trace_id", "annotation__taxonomy_version_id")
            .annotate(**_mask_sums(modes), at=Max("annotation__updated_at"))
            .order_by()
            .values_list("annotation__trace_id", "annotation__taxonomy_version_id", "p", "k", "at", "annotation_id")
        )
        rows = [r[:4] for r in sorted(rows, key=lambda r: (r[4], r[5]))]
        rater = Rater.objects.filter(pk=rater_id).values_list("name", flat=True).first() or "rater"
        label = f"Labels of {rater}"

    target_codes = [c for _m, c in modes[target.pk]]
    bit_of = {c: i for i, c in enumerate(target_codes)}
    mapper = VersionMapper(target, codes=target_codes)
    P: dict[int, int] = {}
    K: dict[int, int] = {}
    for tid, vid, p, k in rows:
        p, k = int(p or 0), int(k or 0)
        if vid != target.pk:
            src = [c for _m, c in modes[vid]]
            values = {c: ((p >> i) & 1) for i, c in enumerate(src) if (k >> i) & 1}
            p = k = 0
            for c, v in mapper.map(vid, values).items():
                if v is not None and c in bit_of:
                    k |= 1 << bit_of[c]
                    p |= v << bit_of[c]
        old_p, old_k = P.get(tid, 0), K.get(tid, 0)
        P[tid] = (old_p & ~k) | p  # later rounds / annotations override what they decide
        K[tid] = old_k | k

    traces = list(
        Trace.objects.filter(trace_q, project=project)
        .order_by("id")
        .values_list(
            "id", "mas_name", "llm_name", "benchmark", "n_steps", "n_agent_switches", "n_repeated_steps", "outcome"
        )
        .iterator(chunk_size=FETCH_ROWS)  # a few large fetches instead of one per 100 rows
    )
    traces = [t for t in traces if t[0] in K and K[t[0]]]
    n, m = len(traces), len(target_codes)
    ids = np.fromiter((t[0] for t in traces), dtype=np.int64, count=n)
    pk = np.fromiter((P[t[0]] for t in traces), dtype=np.int64, count=n)
    kk = np.fromiter((K[t[0]] for t in traces), dtype=np.int64, count=n)
    bits = np.arange(m, dtype=np.int64)
    known = ((kk[:, None] >> bits) & 1).astype(bool)
    present = ((pk[:, None] >> bits) & 1).astype(float)
    X = np.where(known, present, np.nan) if n else np.zeros((0, m))

    mode_rows = list(
        FailureMode.objects.filter(version=target)
        .order_by("order", "code")
        .values_list("code", "name", "category__code")
    )
    cats = list(Category.objects.filter(version=target).order_by("order", "code").values_list("code", "name"))
    outcome = {"success": 1.0, "failure": 0.0}
    return LabelMatrix(
        codes=target_codes,
        names={c: name for c, name, _ in mode_rows},
        column_categories=[cc for _c, _n, cc in mode_rows],
        categories=[c for c, _ in cats],
        category_names=dict(cats),
        trace_ids=ids,
        X=X,
        mas_name=np.array([t[1] for t in traces], dtype=object),
        llm_name=np.array([t[2] for t in traces], dtype=object),
        benchmark=np.array([t[3] for t in traces], dtype=object),
        steps=np.array([t[4] for t in traces], dtype=float),
        switches=np.array([t[5] for t in traces], dtype=float),
        repeated=np.array([t[6] for t in traces], dtype=float),
        success=np.array([outcome.get(t[7], np.nan) for t in traces], dtype=float),
        n_mapped=mapper.mapped,
        source_label=label,
    )
