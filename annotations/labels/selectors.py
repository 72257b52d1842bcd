"""Reads for the annotation workspace: my annotation, its history, open codes, my queue.

Queue rules (documented in the README and the API schema):

* Round work: every trace of a round in state ``open`` or ``review`` where I am a
  ``RoundAnnotator``, labelled with the round's taxonomy version.
* Outside rounds: a project's annotators (and managers) may label ANY trace of the project with
  the project's taxonomy version, except traces that belong to a draft or open round (those are
  labelled inside the round, blind). So every such trace is in my queue, "to do" until I save.
* Status of an item: ``todo`` (no annotation of mine yet), ``draft``, ``submitted``.
* "Next": the first unfinished round item (round order, then trace order), then my drafts
  outside rounds, then the first outside trace I have not labelled; never the trace I come from.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Case,
    CharField,
    Count,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotations.labels import sql
from annotations.labels.attribution import attribution_as_dict, attribution_of
from annotations.labels.visibility import (
    BLIND_ROUND_STATES,
    anchoring_filter,
    anchoring_holds_back,
    annotations_visible_to,
    work_visible,
)
from annotations.models import Annotation, AnnotationEvent, ModeLabel, OpenCode, Round, RoundTrace
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Membership, Project, Trace

ROUND_QUEUE_STATES = (Round.State.OPEN, Round.State.REVIEW)
STATUS_ORDER = {"draft": 0, "todo": 1, "submitted": 2}


# ------------------------------------------------------------------ one annotation


def annotation_find(*, trace: Trace, user, taxonomy_version: TaxonomyVersion, round: Round | None = None):
    """My annotation of this trace (None when I have not saved anything yet).

    The caller's ``trace`` is put on the row instead of joining it: a join would read the trace's
    raw text (tens of MB for the largest traces) on every page view and every autosave.
    """
    annotation = (
        Annotation.objects.select_related("rater", "taxonomy_version", "round", "attribution")
        .filter(trace=trace, rater__user=user, taxonomy_version=taxonomy_version, round=round)
        .first()
    )
    if annotation is not None:
        annotation.trace = trace
    return annotation


def annotation_snapshot(*, annotation: Annotation) -> dict:
    """The annotation's full state as plain JSON (the shape of the API and of history rows).

    A service that just wrote the state leaves it on ``annotation.snapshot``: no need to read it back.
    """
    cached = getattr(annotation, "snapshot", None)
    if cached is not None and cached["revision"] == annotation.revision and cached["state"] == annotation.state:
        return cached
    labels = (
        annotation.labels.select_related("mode")
        .order_by("mode__order", "mode__code")
        .values_list("mode__code", "decision", "evidence", "rationale")
    )
    return annotation_snapshot_of(
        annotation=annotation,
        labels=labels,
        open_codes=annotation.open_codes.values_list("name", flat=True),
        attribution=_attribution(annotation),
    )


def annotation_snapshot_of(*, annotation: Annotation, labels, open_codes, attribution: dict | None) -> dict:
    """The snapshot of ``annotation_snapshot`` from rows already read: ``labels`` as (code, decision,
    evidence, rationale) in mode order (the mode's ``order``, then its code), open codes' names."""
    return {
        "revision": annotation.revision,
        "state": annotation.state,
        "task_success": annotation.task_success,
        "notes": annotation.notes,
        "open_codes": sorted(open_codes),
        "labels": [
            {"code": code, "decision": decision, "evidence": evidence, "rationale": rationale}
            for code, decision, evidence, rationale in labels
        ],
        "attribution": attribution,
    }


def annotation_snapshot_of_rows(
    *, annotation: Annotation, attribution: dict | None, rows: sql.LabelsAndCodes | None = None
) -> dict:
    """``annotation_snapshot`` with its labels and open codes in one plain-SQL query
    (``annotations.labels.sql``), for an annotation read with its attribution (``sql.annotation_lock``);
    ``rows``: those labels and open codes, when they came with it (``with_rows``)."""
    rows, codes = rows if rows is not None else sql.annotation_labels_and_codes(annotation_id=annotation.pk)
    by_id = {m.pk: m for m in version_modes(version=annotation.taxonomy_version)}
    if any(mode_id not in by_id for mode_id, *_ in rows):  # a label outside its version: never written here
        return annotation_snapshot(annotation=annotation)
    rows.sort(key=lambda row: (by_id[row[0]].order, by_id[row[0]].code))
    return annotation_snapshot_of(
        annotation=annotation,
        labels=[
            (by_id[mode_id].code, decision, evidence, rationale) for mode_id, decision, evidence, rationale in rows
        ],
        open_codes=codes,
        attribution=attribution,
    )


def _attribution(annotation: Annotation) -> dict | None:
    """The attribution, without a query when it came with the annotation (select_related)."""
    if "attribution" in annotation._state.fields_cache:
        return attribution_as_dict(annotation._state.fields_cache["attribution"])
    return attribution_of(annotation)


def annotation_empty_snapshot() -> dict:
    return {
        "revision": 0,
        "state": "draft",
        "task_success": "unknown",
        "notes": "",
        "open_codes": [],
        "labels": [],
        "attribution": None,
    }


def annotation_history(*, annotation: Annotation) -> QuerySet[AnnotationEvent]:
    return annotation.events.select_related("by").order_by("revision", "id")


def trace_annotations_visible(
    *, user, project: Project, trace: Trace, held_back: bool | None = None
) -> QuerySet[Annotation]:
    """Other raters' annotations of the trace that the blind rule lets this user see, less what
    anti-anchoring holds back until she has submitted her own (``anchoring_holds_back``; pass its
    answer as ``held_back`` when it is already known)."""
    qs = annotations_visible_to(user=user, project=project, qs=Annotation.objects.filter(trace=trace))
    if held_back is None:
        held_back = anchoring_holds_back(user=user, project=project, trace_id=trace.pk)
    if held_back:
        qs = anchoring_filter(project=project, qs=qs)
    return (
        qs.exclude(rater__user_id=user.pk)
        .select_related("rater", "taxonomy_version__taxonomy", "round", "attribution")
        .prefetch_related(Prefetch("labels", queryset=ModeLabel.objects.select_related("mode")))
        .order_by("rater__kind", "rater__name", "id")
    )


# ------------------------------------------------------------------ open codes


def open_code_list(*, project: Project, user, q: str = "", role: str | None = None) -> QuerySet[OpenCode]:
    """The project's open codes with how many annotations use them, most used first.

    A rater knows her own codes, and another rater's only where the blind rule would show her that
    rater's labels (``work_visible`` through the codes' annotations, anti-anchoring included):
    nothing of traces labelled blind now, no other human's outside rounds, for an annotator only on
    traces she has submitted herself. Only those uses are counted; a code with none is not listed.
    """
    qs = OpenCode.objects.filter(project=project)
    if q:
        qs = qs.filter(name__icontains=q.strip())
    shown = work_visible(user=user, project=project, role=role, prefix="annotations__", anchoring=True)
    uses = Count("annotations", filter=shown, distinct=True)
    return qs.annotate(n_uses=uses).filter(n_uses__gt=0).order_by("-n_uses", "name")


# ------------------------------------------------------------------ queue


def _annotating_projects(*, user, project: Project | None) -> QuerySet[Project]:
    qs = Project.objects.filter(taxonomy_version__isnull=False)
    if not user.is_superuser:
        qs = qs.filter(
            memberships__user=user, memberships__role__in=[Membership.Role.ANNOTATOR, Membership.Role.MANAGER]
        )
    if project is not None:
        qs = qs.filter(pk=project.pk)
    return qs


def _status_expr(state_subquery) -> Coalesce:
    return Coalesce(state_subquery, Value("todo"), output_field=CharField())


def _status_rank():
    return Case(
        *[When(status=key, then=Value(rank)) for key, rank in STATUS_ORDER.items()],
        output_field=IntegerField(),
    )


def queue_round_items(*, user, project: Project | None = None, status: str = "") -> QuerySet[RoundTrace]:
    """Round assignments (open or in review) with my status, round order then trace order."""
    mine = Annotation.objects.filter(
        trace_id=OuterRef("trace_id"),
        round_id=OuterRef("round_id"),
        rater__user=user,
        taxonomy_version_id=OuterRef("round__taxonomy_version_id"),
    ).values("state")[:1]
    qs = RoundTrace.objects.filter(round__state__in=ROUND_QUEUE_STATES, round__round_annotators__user=user)
    if project is not None:
        qs = qs.filter(round__project=project)
    qs = (
        qs.select_related("round__project")
        .only(
            "id",
            "order",
            "trace_id",
            "round__id",
            "round__name",
            "round__state",
            "round__project__slug",
            "round__project__name",
            "trace__id",
            "trace__title",
            "trace__external_id",
            "trace__mas_name",
            "trace__n_steps",
        )
        .select_related("trace")
        .annotate(status=_status_expr(Subquery(mine)))
    )
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("round__created_at", "round_id", "order", "trace_id")


def queue_trace_items(*, user, project: Project | None = None, status: str = "") -> QuerySet[Trace]:
    """Traces I may label outside rounds, with my status: drafts first, then to do, then done."""
    mine = Annotation.objects.filter(
        trace_id=OuterRef("pk"),
        round__isnull=True,
        rater__user=user,
        taxonomy_version_id=OuterRef("project__taxonomy_version_id"),
    ).values("state")[:1]
    blind = RoundTrace.objects.filter(round__state__in=BLIND_ROUND_STATES).values("trace_id")
    qs = (
        Trace.objects.filter(project__in=_annotating_projects(user=user, project=project))
        .exclude(pk__in=blind)
        .select_related("project")
        .only(
            "id",
            "title",
            "external_id",
            "mas_name",
            "n_steps",
            "project__id",
            "project__slug",
            "project__name",
        )
        .annotate(status=_status_expr(Subquery(mine)))
    )
    if status:
        qs = qs.filter(status=status)
    return qs.annotate(status_rank=_status_rank()).order_by("status_rank", "project_id", "id")


@dataclass
class QueueCounts:
    total: int = 0
    todo: int = 0
    draft: int = 0
    submitted: int = 0

    @property
    def percent_done(self) -> int:
        return int(100 * self.submitted / self.total) if self.total else 0


def _count(qs) -> QueueCounts:
    row = qs.aggregate(
        total=Count("pk"),
        draft=Count("pk", filter=Q(status="draft")),
        submitted=Count("pk", filter=Q(status="submitted")),
    )
    return QueueCounts(
        total=row["total"],
        draft=row["draft"],
        submitted=row["submitted"],
        todo=row["total"] - row["draft"] - row["submitted"],
    )


def queue_counts(*, user, project: Project | None = None) -> dict[str, QueueCounts]:
    """Progress counts: {"rounds": ..., "traces": ...} (two queries)."""
    return {
        "rounds": _count(queue_round_items(user=user, project=project).order_by()),
        "traces": _count(queue_trace_items(user=user, project=project).order_by()),
    }


@dataclass
class QueueTarget:
    project_slug: str
    trace_id: int
    round_id: int | None


def queue_next(
    *, user, project: Project | None = None, after_trace_id: int | None = None, after_round_id: int | None = None
) -> QueueTarget | None:
    """Where "submit and next" goes: unfinished round work, then my drafts, then unlabelled traces."""
    rounds = queue_round_items(user=user, project=project).exclude(status="submitted")
    if after_trace_id is not None:
        rounds = rounds.exclude(trace_id=after_trace_id, round_id=after_round_id)
    item = rounds.first()
    if item is not None:
        return QueueTarget(item.round.project.slug, item.trace_id, item.round_id)
    traces = queue_trace_items(user=user, project=project).exclude(status="submitted")
    if after_trace_id is not None and after_round_id is None:
        # Prefer the traces after the current one, so "next" walks forward through the project.
        later = traces.filter(status="todo", pk__gt=after_trace_id).exclude(pk=after_trace_id)
        draft = traces.filter(status="draft").exclude(pk=after_trace_id).first()
        trace = draft or later.first() or traces.exclude(pk=after_trace_id).first()
    else:
        trace = traces.first()
    if trace is None:
        return None
    return QueueTarget(trace.project.slug, trace.pk, None)


def round_for_annotator(*, user, project: Project, round_id: int) -> Round | None:
    """The round (of this project) the user annotates in, or None."""
    return (
        Round.objects.select_related("taxonomy_version")
        .filter(project=project, pk=round_id, round_annotators__user=user)
        .first()
    )


def round_of_trace_for_annotator(*, user, trace: Trace) -> Round | None:
    """An open or in-review round holding the trace where the user annotates (the oldest)."""
    return (
        Round.objects.filter(round_traces__trace=trace, state__in=ROUND_QUEUE_STATES, round_annotators__user=user)
        .order_by("created_at", "id")
        .first()
    )
