"""Reads for the analytics dashboard: a compact trace x mode label matrix, aggregated in SQL.

Labels arrive folded per (round, trace) or per annotation into two integers (``present`` and
``known`` bit masks over the version's modes): agreed labels from the trigger-kept ``AgreedMask``
rows (``annotations.rounds.agreed``), a rater's labels by ``SUM(CASE ...)`` in SQL, so 10,000 traces
x 14 modes arrive as ~10,000 small rows; the mapping across versions and the fold run over numpy
arrays (``agreed_fold_arrays``), without a Python loop over rows or labels. Labels of other taxonomy
versions are carried to the target version (default: the project's working version) through the
recorded mappings, and the matrix says how many labels came from which version and how many could
not be mapped (``LabelMatrix.mapping``).

Which labels: ``"agreed"`` = the project's agreed labels (``annotations.rounds.agreed``: the
consensus of closed rounds), visible to every member; or one rater's submitted labels, filtered
through the blind rule (``annotations_visible_to``), so a member only ever sees the raters they may see.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.contrib.postgres.aggregates import StringAgg
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, TextField, Value
from django.db.models.functions import Cast, Coalesce

from annotations.analytics.stats import Groups
from annotations.labels.visibility import annotations_visible_to, blind_trace_ids
from annotations.models import Annotation, ModeLabel, Rater
from annotations.rounds.agreed import (
    MaskArrays,
    agreed_fold_arrays,
    agreed_labels_stamp,
    agreed_mask_arrays,
    mask_sum,
)
from taxonomy.mapping import VersionMapper, mappings_fingerprint
from taxonomy.models import Category, TaxonomyVersion
from taxonomy.selectors import version_modes, versions_mode_codes
from traces.models import Project, Trace, TracesStamp
from traces.projects.selectors import project_role

AGREED = "agreed"
FILTER_FIELDS = ("mas_name", "llm_name", "benchmark")


def _clean_filters(filters: dict | None) -> dict:
    """The filters that select traces: known fields with at least one accepted value."""
    return {k: v for k, v in (filters or {}).items() if k in FILTER_FIELDS and v}


def _traces_matching(*, project: Project, filters: dict) -> QuerySet:
    """The project's traces whose fields take one of the accepted values (``_clean_filters``)."""
    q = Q()
    for k, v in filters.items():
        q &= Q(**{f"{k}__in": v})
    return Trace.objects.filter(q, project=project)


@dataclass
class LabelMatrix:
    codes: list[str]
    names: dict[str, str]
    column_categories: list[str]
    categories: list[str]
    category_names: dict[str, str]
    trace_ids: np.ndarray
    X: np.ndarray
    # framework, LLM and benchmark per row (``FILTER_FIELDS``), as codes into their distinct values
    groups: dict[str, Groups]
    steps: np.ndarray
    switches: np.ndarray
    repeated: np.ndarray
    success: np.ndarray  # 1 succeeded, 0 failed, NaN unknown
    n_mapped: int = 0
    target_label: str = ""
    # per source version: labels read, mapped, unknown, dropped, no path (VersionMapper.summary)
    mapping: list[dict] = field(default_factory=list)
    source_label: str = "Agreed labels (closed rounds)"
    extra: dict = field(default_factory=dict)

    def subset(self, mask: np.ndarray) -> np.ndarray:
        return self.X[mask]

    @property
    def mas_name(self) -> np.ndarray:
        return self.groups["mas_name"].strings()

    @property
    def llm_name(self) -> np.ndarray:
        return self.groups["llm_name"].strings()

    @property
    def benchmark(self) -> np.ndarray:
        return self.groups["benchmark"].strings()

    # Cached as two bit-packed planes (known, present) instead of 8 bytes per cell: at 100,000
    # traces x 14 modes 0.35 MB to pickle, not 11 MB.
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        X = state.pop("X")
        state["X_packed"] = (X.shape, np.packbits(~np.isnan(X), axis=None), np.packbits(X == 1, axis=None))
        return state

    def __setstate__(self, state: dict) -> None:
        shape, known, present = state.pop("X_packed")
        size = int(np.prod(shape))
        k = np.unpackbits(known, count=size).reshape(shape).astype(bool)
        p = np.unpackbits(present, count=size).reshape(shape)
        state["X"] = np.where(k, p, np.nan) if size else np.zeros(shape)
        self.__dict__.update(state)


def dashboard_sources(*, user, project: Project) -> list[tuple[str, str]]:
    """Label sources the user may pick: agreed labels, then every rater with labels they may see."""
    visible = annotations_visible_to(user=user, project=project).filter(state=Annotation.State.SUBMITTED)
    # one probe per rater (a few dozen), each stopping at its first visible annotation (LIMIT 1 keeps
    # PostgreSQL from turning it into a join); an IN or EXISTS over the visible annotations read them
    # all (150-500 ms for 140,000 at 1 M traces)
    first = visible.filter(rater_id=OuterRef("pk")).order_by().values("pk")[:1]
    raters = (
        Rater.objects.annotate(seen=Subquery(first))
        .filter(seen__isnull=False)
        .order_by("kind", "name")
        .values_list("id", "name", "kind")
    )
    kinds = dict(Rater.Kind.choices)
    return [(AGREED, "Agreed labels (closed rounds)")] + [
        (str(rid), f"{name} ({kinds.get(kind, kind)})") for rid, name, kind in raters
    ]


def project_trace_facts(*, project: Project) -> dict:
    """The project's trace count and highest id (one index-only scan of ``trace_project_recent``),
    which change with every import or deletion, and its ``TracesStamp`` (bumped by a trigger on
    every UPDATE of a trace row: an edit in admin), in one query. Part of the keys of the
    dashboard's caches."""
    stamp = TracesStamp.objects.filter(project_id=project.pk).values("version")[:1]
    # Max of an uncorrelated subquery: computed once (an InitPlan), and an aggregate as aggregate() wants
    facts = Trace.objects.filter(project=project).aggregate(n=Count("id"), last=Max("id"), edits=Max(Subquery(stamp)))
    facts["edits"] = facts["edits"] or 0
    return facts


def project_trace_values(*, project: Project, facts: dict | None = None) -> dict[str, list[str]]:
    """Distinct frameworks, LLMs and benchmarks of the project's traces, sorted, the empty value
    among them when a trace has it; one ``GROUP BY``, cached per ``project_trace_facts`` (it reads
    every trace: 0.1-0.4 s at 100,000)."""
    facts = facts or project_trace_facts(project=project)
    key = f"mast:trace-values:{trace_facts_key(project=project, facts=facts)}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    rows = _distinct_facets(project_id=project.pk)
    if rows is None:
        rows = (
            Trace.objects.filter(project=project)
            .values_list(*FILTER_FIELDS)
            .annotate(n=Count("id"))
            .order_by(*FILTER_FIELDS)
        )
    out: dict[str, set[str]] = {f: set() for f in FILTER_FIELDS}
    for row in rows:
        for f, v in zip(FILTER_FIELDS, row[:3], strict=True):
            out[f].add(v)
    values = {f: sorted(v) for f, v in out.items()}
    cache.set(key, values, 3600)
    return values


FACET_COMBINATIONS_SKIPPED = 1000


def _distinct_facets(*, project_id: int) -> list[tuple] | None:
    """The project's distinct (framework, LLM, benchmark) triples by skipping through the
    ``trace_project_facets`` index, one probe per triple (a loose index scan: ~3 ms for 84
    triples at 100,000 traces, where the ``GROUP BY`` reads every entry, ~20 ms). None past
    ``FACET_COMBINATIONS_SKIPPED`` triples, where the ``GROUP BY`` is the cheaper read."""
    sql = """
        WITH RECURSIVE facets AS (
            (SELECT mas_name, llm_name, benchmark FROM traces_trace WHERE project_id = %(p)s
             ORDER BY mas_name, llm_name, benchmark LIMIT 1)
            UNION ALL
            SELECT n.* FROM facets f CROSS JOIN LATERAL (
                SELECT t.mas_name, t.llm_name, t.benchmark FROM traces_trace t
                WHERE t.project_id = %(p)s
                  AND (t.mas_name, t.llm_name, t.benchmark) > (f.mas_name, f.llm_name, f.benchmark)
                ORDER BY t.mas_name, t.llm_name, t.benchmark LIMIT 1
            ) n
        )
        SELECT mas_name, llm_name, benchmark FROM facets LIMIT %(cap)s
    """
    with connection.cursor() as cur:
        cur.execute(sql, {"p": project_id, "cap": FACET_COMBINATIONS_SKIPPED + 1})
        rows = cur.fetchall()
    return rows if len(rows) <= FACET_COMBINATIONS_SKIPPED else None


def dashboard_filter_choices(*, project: Project, facts: dict | None = None) -> dict[str, list[str]]:
    """Distinct non-empty frameworks, LLMs and benchmarks of the project (``project_trace_values``)."""
    values = project_trace_values(project=project, facts=facts)
    return {f: [v for v in vs if v] for f, vs in values.items()}


def _blind_ids(*, user, project: Project) -> frozenset[int]:
    """The traces ``user`` is labelling blind now (``blind_trace_ids``), read once per user object
    (a request's), as ``project_role`` caches the role: the fingerprint and the matrix both ask."""
    cache = user.__dict__.setdefault("_blind_trace_ids", {})
    if project.pk not in cache:
        cache[project.pk] = frozenset(blind_trace_ids(user=user, project=project).values_list("trace_id", flat=True))
    return cache[project.pk]


def labels_fingerprint(
    *,
    user,
    project: Project,
    source: str,
    filters: dict | None = None,
    target: TaxonomyVersion | None = None,
    facts_of_traces: dict | None = None,
) -> str:
    """Changes whenever the matrix `label_matrix` would return changes (labels, traces, visibility);
    two cheap aggregates, so the dashboard can cache per (project, filters, labels fingerprint)."""
    if source == AGREED:
        facts = {"stamp": agreed_labels_stamp(project=project)}  # one row, not every adjudication
        # agreed labels of closed rounds are the same for every member, less the traces she is
        # labelling blind again now (the blind rule): members blind on the same traces share it
        who = f"members-but:{','.join(map(str, sorted(_blind_ids(user=user, project=project))))}"
    else:
        # The rater's submitted annotations, of every project (an index-only count and max on
        # annotation_rater_updated: counting those the member sees through the blind rule read
        # each of them and its trace, ~260 ms for a judge's 100,000), and every input of what
        # the member sees of them (visibility.work_visible): her role, the project's suggestions
        # setting, the rounds' states and reveal flags (round writes bump the labels stamp) and
        # the traces she is blind on now.
        facts = Annotation.objects.filter(rater_id=int(source), state=Annotation.State.SUBMITTED).aggregate(
            n=Count("*"), at=Max("updated_at")
        )
        facts |= {
            "rounds": agreed_labels_stamp(project=project),
            "role": project_role(user=user, project=project),
            "suggestions": project.reveal_suggestions,
        }
        who = f"user{user.pk}:blind:{','.join(map(str, sorted(_blind_ids(user=user, project=project))))}"
    traces = facts_of_traces if facts_of_traces is not None else project_trace_facts(project=project)
    key = json.dumps(
        [
            project.pk,
            (target or project.taxonomy_version).pk,
            source,
            who,
            sorted((filters or {}).items()),
            facts,
            traces,
            mappings_fingerprint(),
        ],
        default=str,
    )
    return hashlib.sha256(key.encode()).hexdigest()


SEP = "\x1f"  # ASCII unit separator between the values of one column (see ``trace_columns``)


CODED = "coded"  # a ``trace_columns`` kind: a text column as (sorted distinct values, int32 codes)


def _coded(parts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    values = sorted(set(parts))
    at = {v: i for i, v in enumerate(values)}
    return np.array(values, dtype=str), np.fromiter(map(at.__getitem__, parts), dtype=np.int32, count=len(parts))


def trace_columns(qs: QuerySet, fields: dict[str, type | str]) -> dict[str, np.ndarray | tuple]:
    """``fields`` (name -> int, float, str or ``CODED``; ``id`` among them) of the rows of ``qs`` as
    one numpy array per field, in id order; a ``CODED`` field as (its distinct values sorted, each
    row's position in them): ~7 ms a column at 100,000 rows, where a unicode array and
    ``np.unique`` cost ~28.

    One row holding each column as one string (``string_agg``, values split on ``SEP``): at
    100,000 traces 80 ms in the database and ~30 ms here, against ~380 ms for ``array_agg`` (its
    text arrays) or ~200 ms + 170 ms of CPU for 100,000 row tuples. A value that holds ``SEP``
    itself makes its column split into more parts than there are rows; that is detected and the
    rows are read the ordinary way instead (transposed). NULL numbers become NaN."""
    sums = {}
    for f, kind in fields.items():
        text = Cast(f, TextField()) if kind in (int, float) else F(f)
        sums[f"c_{f}"] = StringAgg(Coalesce(text, Value("NaN" if kind is float else "")), delimiter=SEP)
    agg = qs.order_by().aggregate(n=Count("id"), **sums)
    arrays = {}
    for f, kind in fields.items():
        text = agg[f"c_{f}"] if agg["n"] else ""
        parts = text.split(SEP) if agg["n"] and kind in (str, CODED) else []
        if kind is str:
            arrays[f] = np.array(parts, dtype=str)
        elif kind == CODED:
            arrays[f] = _coded(parts)
        else:  # parsed in C; a short result (a value it cannot read) falls back below
            arrays[f] = np.fromstring(text, dtype=np.int64 if kind is int else float, sep=SEP)
    if all(len(v[1] if isinstance(v, tuple) else v) == agg["n"] for v in arrays.values()):
        order = np.argsort(arrays["id"], kind="stable")  # aggregates of one query see one row order
        return {f: (a[0], a[1][order]) if isinstance(a, tuple) else a[order] for f, a in arrays.items()}
    rows = list(qs.order_by("id").values_list(*fields))
    out: dict[str, np.ndarray | tuple] = {}
    for i, (f, kind) in enumerate(fields.items()):
        column = [r[i] for r in rows]
        if kind == CODED:
            out[f] = _coded(column)
        else:
            out[f] = np.array(column, dtype=str if kind is str else np.int64 if kind is int else kind)
    return out


DASHBOARD_TRACE_FIELDS = {
    "id": int,
    "mas_name": CODED,
    "llm_name": CODED,
    "benchmark": CODED,
    # integers in the table (NOT NULL): parsed as int64, 2 ms a column at 100,000 where float is 7
    "n_steps": int,
    "n_agent_switches": int,
    "n_repeated_steps": int,
    "outcome": CODED,
}
TRACE_COLUMNS_SECONDS = 3600
OUTCOME_VALUE = {"success": 1.0, "failure": 0.0}  # anything else: unknown (NaN)


@dataclass
class TraceColumns:
    """What the dashboard reads of each trace matching a filter (it depends on the traces only,
    not on any label), in id order. Framework, LLM and benchmark as codes into their distinct
    values: 100,000 traces fit in ~3 MB, against ~12 MB as unicode arrays."""

    ids: np.ndarray  # int64, ascending
    codes: dict[str, np.ndarray]  # field -> int32 position in values[field]
    values: dict[str, np.ndarray]  # field -> its distinct values (unicode array, sorted)
    steps: np.ndarray
    switches: np.ndarray
    repeated: np.ndarray
    success: np.ndarray  # 1 succeeded, 0 failed, NaN unknown


def trace_facts_key(*, project: Project, facts: dict, filters: dict | None = None) -> str:
    """Part of a cache key for what depends on the project's traces (and ``filters``) only: the
    traces' count and highest id, which move with every import or deletion, and the traces stamp,
    which moves with every edit of a trace row (``project_trace_facts``)."""
    chosen = sorted((k, sorted(v)) for k, v in (filters or {}).items() if v)
    digest = hashlib.sha256(json.dumps(chosen).encode()).hexdigest()[:32]
    return f"{project.pk}:{facts['n']}:{facts['last']}:{facts['edits']}:{digest}"


def dashboard_trace_columns(
    *, project: Project, filters: dict | None = None, facts: dict | None = None
) -> TraceColumns:
    """``TraceColumns`` of the project's traces matching ``filters`` (field -> accepted values),
    cached per (project, filters, ``project_trace_facts``): a label saved, a round closed or a
    decision taken leaves it as it is, so the first dashboard after such a change reads only labels."""
    filters = _clean_filters(filters)
    facts = facts or project_trace_facts(project=project)
    key = f"mast:dashboard-traces:{trace_facts_key(project=project, facts=facts, filters=filters)}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    cols = trace_columns(_traces_matching(project=project, filters=filters), DASHBOARD_TRACE_FIELDS)
    outcomes, outcome_codes = cols["outcome"]
    success = np.array([OUTCOME_VALUE.get(v, np.nan) for v in outcomes.tolist()], dtype=float)[outcome_codes]
    out = TraceColumns(
        ids=cols["id"],
        codes={name: cols[name][1] for name in FILTER_FIELDS},
        values={name: cols[name][0] for name in FILTER_FIELDS},
        steps=cols["n_steps"].astype(float),
        switches=cols["n_agent_switches"].astype(float),
        repeated=cols["n_repeated_steps"].astype(float),
        success=success,
    )
    cache.set(key, out, TRACE_COLUMNS_SECONDS)
    return out


def _annotation_mask_arrays(per_annotation: QuerySet, layouts: dict[int, list[str]]) -> MaskArrays | None:
    """The rows of ``per_annotation`` (trace, annotation, version, present, known, updated at: one
    per annotation) as ``MaskArrays`` in override order (latest update, then annotation id, last),
    read as one row of ``string_agg`` columns with the time in microseconds: at 100,000
    annotations ~0.5 s less CPU than row tuples of Decimals and datetimes sorted in Python.
    None when a column comes back short (a NULL), so the caller reads the rows."""
    sql, params = per_annotation.query.sql_with_params()
    columns = {
        "t": '"annotation__trace_id"',
        "a": '"annotation_id"',
        "v": '"annotation__taxonomy_version_id"',
        "p": '"p"',
        "k": '"k"',
        "at": '(EXTRACT(EPOCH FROM "at") * 1000000)::bigint',
    }
    aggs = ", ".join(f"STRING_AGG(({expr})::text, ',')" for expr in columns.values())
    with connection.cursor() as cur:
        cur.execute(f"SELECT COUNT(*), {aggs} FROM ({sql}) AS per_annotation", params)  # noqa: S608 - our SQL
        n, *texts = cur.fetchone()
    cols = {name: np.fromstring(text or "", dtype=np.int64, sep=",") for name, text in zip(columns, texts, strict=True)}
    if any(len(c) != n for c in cols.values()):
        return None
    order = np.lexsort((cols["a"], cols["at"]))
    return MaskArrays(
        cols["t"][order],
        cols["v"][order],
        cols["k"][order].astype(np.uint64),
        cols["p"][order].astype(np.uint64),
        layouts,
    )


def mask_bits(masks: np.ndarray, m: int) -> np.ndarray:
    """Rows of 0/1 (uint8): bit j of ``masks[i]`` (uint64) at ``[i, j]``, j < ``m`` <= 64. The
    masks' bytes unpacked at once (a few ms at 100,000 x 14, where shifting a 100,000 x 14 uint64
    copy per bit cost ~10)."""
    as_bytes = masks.astype("<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :m]


def _rater_masks(*, user, project: Project, source: str, trace_ids: Any, target: TaxonomyVersion) -> tuple[Any, str]:
    """One rater's submitted labels that ``user`` may see, as mask arrays, and the source's name;
    the latest annotation wins per mode, as the latest closed round does for agreed labels."""
    try:
        rater_id = int(source)
    except ValueError:
        raise ValueError(f"unknown label source {source!r}") from None
    visible = annotations_visible_to(user=user, project=project).filter(
        rater_id=rater_id, state=Annotation.State.SUBMITTED
    )
    if trace_ids is not None:
        visible = visible.filter(trace_id__in=trace_ids)
    versions = set(visible.values_list("taxonomy_version_id", flat=True).distinct()) | {target.pk}
    modes = versions_mode_codes(version_ids=versions)
    per_annotation = (
        ModeLabel.objects.filter(annotation__in=visible)
        .values("annotation_id", "annotation__trace_id", "annotation__taxonomy_version_id")
        .annotate(
            p=mask_sum(modes, decision="present"),
            k=mask_sum(modes, decision__in=["present", "absent"]),
            at=Max("annotation__updated_at"),
        )
        .order_by()
        .values_list("annotation__trace_id", "annotation_id", "annotation__taxonomy_version_id", "p", "k", "at")
    )
    layouts = {vid: [c for _m, c in ms] for vid, ms in modes.items()}
    masks = _annotation_mask_arrays(per_annotation, layouts)
    if masks is None:
        # the latest annotation wins per mode, as the latest closed round does for agreed labels
        rows = [r[:5] for r in sorted(per_annotation, key=lambda r: (r[5], r[1]))]
        masks = MaskArrays.from_rows(rows, layouts)
    rater = Rater.objects.filter(pk=rater_id).values_list("name", flat=True).first() or "rater"
    label = f"Labels of {rater}"
    return masks, label


def label_matrix(
    *,
    user,
    project: Project,
    source: str = AGREED,
    filters: dict | None = None,
    target: TaxonomyVersion | None = None,
    facts: dict | None = None,
) -> LabelMatrix:
    """The label matrix of the project's traces matching `filters`, from `source` (see module doc),
    on ``target`` (default: the working version). The traces' own columns come from
    ``dashboard_trace_columns`` (cached per ``facts``, the traces' ``project_trace_facts``)."""
    target = target or project.taxonomy_version
    filters = _clean_filters(filters)
    trace_ids = _traces_matching(project=project, filters=filters).values("id") if filters else None
    if source == AGREED:
        # the blind rule: no consensus of a trace the user is labelling blind again now
        blind = _blind_ids(user=user, project=project)
        if blind:
            kept = Trace.objects.filter(project=project)
            if trace_ids is not None:
                kept = kept.filter(pk__in=trace_ids)
            trace_ids = kept.exclude(pk__in=blind).values("id")
        masks = agreed_mask_arrays(project=project, trace_ids=trace_ids, extra_versions={target.pk})
        label = "Agreed labels (closed rounds)"
    else:
        masks, label = _rater_masks(user=user, project=project, source=source, trace_ids=trace_ids, target=target)

    target_modes = version_modes(version=target)
    target_codes = [m.code for m in target_modes]
    mapper = VersionMapper(target, codes=target_codes)
    folded = agreed_fold_arrays(masks, mapper=mapper)

    cols = dashboard_trace_columns(project=project, filters=filters, facts=facts)
    all_ids = cols.ids
    at = np.minimum(np.searchsorted(folded.trace_ids, all_ids), max(len(folded.trace_ids) - 1, 0))
    labelled = (
        (folded.trace_ids[at] == all_ids) & (folded.known[at] != 0) if len(folded.trace_ids) else all_ids != all_ids
    )
    n, m = int(labelled.sum()), len(target_codes)
    ids = all_ids[labelled]
    pk = folded.present[at[labelled]]
    kk = folded.known[at[labelled]]
    X = np.where(mask_bits(kk, m).astype(bool), mask_bits(pk, m), np.nan) if n else np.zeros((0, m))

    cats = list(Category.objects.filter(version=target).order_by("order", "code").values_list("code", "name"))
    return LabelMatrix(
        codes=target_codes,
        names={m.code: m.name for m in target_modes},
        column_categories=[m.category.code for m in target_modes],
        categories=[c for c, _ in cats],
        category_names=dict(cats),
        trace_ids=ids,
        X=X,
        # codes, not strings: the matrix is cached, and 300,000 str objects cost ~0.2 s to pickle
        # at 100,000 traces (unicode arrays 12 MB); grouping compares integers
        groups={f: Groups(cols.values[f], cols.codes[f][labelled]) for f in FILTER_FIELDS},
        steps=cols.steps[labelled],
        switches=cols.switches[labelled],
        repeated=cols.repeated[labelled],
        success=cols.success[labelled],
        n_mapped=mapper.mapped,
        target_label=target.label,
        mapping=mapper.summary(),
        source_label=label,
    )


MATRIX_SECONDS = 600


def label_matrix_cached(*, user, project: Project, source: str = AGREED, filters: dict | None = None,
                        target: TaxonomyVersion | None = None, facts: dict | None = None,
                        fingerprint: str | None = None) -> LabelMatrix:  # fmt: skip
    """``label_matrix``, cached per ``labels_fingerprint`` (a new key after any label, trace or
    visibility change, so a hit is never stale): the dashboard, the paper table, experiments,
    monitoring and alert rules share it. ``fingerprint``: the caller's, when it has it already."""
    facts = facts if facts is not None else project_trace_facts(project=project)
    fingerprint = fingerprint or labels_fingerprint(
        user=user, project=project, source=source, filters=filters, target=target, facts_of_traces=facts
    )
    key = f"mast:dashboard-matrix:{fingerprint}"
    M = cache.get(key)
    if M is None:
        M = label_matrix(user=user, project=project, source=source, filters=filters, target=target, facts=facts)
        cache.set(key, M, MATRIX_SECONDS)
    return M
