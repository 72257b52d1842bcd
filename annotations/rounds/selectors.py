"""Reads on calibration rounds: listings, progress, the label matrix, units, and who may see what.
Neighbours: ``sampling`` (a new round's sample), ``disagreements`` (the review pages' reads) and
``agreed`` (the project's agreed labels: what closed rounds decided).

The blind rule itself lives in ``annotations.labels.visibility``; ``round_access`` here only says which
round pages a user may open (report, disagreements, progress details), and every place that shows
labels to someone who is not a manager filters them through ``annotations_visible_to``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Case, Count, Exists, Max, OuterRef, QuerySet, Subquery, Sum, Value, When
from django.db.models.fields.json import KT
from django.http import Http404

from annotations.labels.visibility import round_report_withheld, round_withheld_trace_ids, rounds_withheld
from annotations.models import (
    Adjudication,
    AgreementReport,
    Annotation,
    ModeLabel,
    Rater,
    Round,
    RoundAnnotator,
    RoundTrace,
)
from annotations.rounds.agreed import majority_vote
from taxonomy.mapping import mapping_steps
from taxonomy.models import FailureMode, TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Membership, Project, Trace
from traces.projects.selectors import project_role

HUMANS = "humans"
DECISION_VALUE = {ModeLabel.Decision.PRESENT: 1.0, ModeLabel.Decision.ABSENT: 0.0}


# --------------------------------------------------------------------------------------
# Listing and access
# --------------------------------------------------------------------------------------


def round_list_for_project(*, project: Project, user=None) -> QuerySet[Round]:
    """Rounds of a project with counts, submitted annotations and the stored headline kappa.

    One query: the counts are subqueries, the headline is read out of the stored human report's
    JSON without loading the report; ``is_mine`` says whether ``user`` annotates in the round.
    With ``user``, the headline of a round whose report is withheld from her (``rounds_withheld``:
    it shares traces with a round she is labelling blind) is None.
    """
    headline = AgreementReport.objects.filter(round=OuterRef("pk"), rater_set=HUMANS)
    submitted = (
        Annotation.objects.filter(round=OuterRef("pk"), state=Annotation.State.SUBMITTED)
        .order_by()
        .values("round")
        .annotate(n=Count("pk"))
        .values("n")
    )
    n_traces = RoundTrace.objects.filter(round=OuterRef("pk")).order_by().values("round").annotate(n=Count("pk"))
    n_annotators = (
        RoundAnnotator.objects.filter(round=OuterRef("pk")).order_by().values("round").annotate(n=Count("pk"))
    )
    mine = RoundAnnotator.objects.filter(round=OuterRef("pk"), user_id=getattr(user, "pk", None))
    kappa = Subquery(headline.values(v=KT("data__mean_pairwise_kappa__value"))[:1])
    if user is not None:  # an earlier round's report is withheld from who is blind on its traces
        kappa = Case(When(pk__in=rounds_withheld(user=user, project=project), then=Value(None)), default=kappa)
    return (
        Round.objects.filter(project=project)
        .select_related("taxonomy_version__taxonomy")
        .annotate(
            is_mine=Exists(mine),
            n_traces=Subquery(n_traces.values("n")),
            n_annotators=Subquery(n_annotators.values("n")),
            n_submitted=Subquery(submitted),
            headline_kappa=kappa,
        )
        .order_by("created_at", "id")
    )


def round_get(*, project: Project, round_id: int) -> Round:
    rnd = (
        Round.objects.select_related("taxonomy_version__taxonomy", "project")
        .filter(project=project, pk=round_id)
        .first()
    )
    if rnd is None:
        raise Http404("No such round in this project.")
    return rnd


def round_is_annotator(*, round: Round, user) -> bool:
    return RoundAnnotator.objects.filter(round=round, user_id=user.pk).exists()


@dataclass
class RoundAccess:
    role: str | None
    is_annotator: bool
    can_manage: bool
    can_see_report: bool
    why_not: str = ""

    @property
    def can_see_disagreements(self) -> bool:
        return self.can_see_report


def round_access(*, user, round: Round) -> RoundAccess:
    """What the user may open in this round.

    - Managers run rounds and see everything, except a manager who is an annotator of the
      round while it is draft/open: they are blind like any other annotator.
    - Annotators and viewers see the report and disagreements only once the round is in review
      (or closed) and the manager allowed it (``reveal_in_review``).
    """
    role = project_role(user=user, project=round.project)
    return _access(role=role, is_annotator=round_is_annotator(round=round, user=user), round=round)


def _access(*, role: str | None, is_annotator: bool, round: Round) -> RoundAccess:
    """``round_access``'s rule once the role and the annotator question are answered (the trend
    answers them for every round at once)."""
    is_manager = role == Membership.Role.MANAGER
    if round.is_blind and is_annotator:
        return RoundAccess(role, is_annotator, is_manager, False, "The round is open: labels stay blind until review.")
    if is_manager:
        return RoundAccess(role, is_annotator, True, True)
    if round.is_blind:
        return RoundAccess(role, is_annotator, False, False, "The round is still open: the report comes after review.")
    if not round.reveal_in_review:
        return RoundAccess(role, is_annotator, False, False, "The manager keeps this round's labels hidden.")
    return RoundAccess(role, is_annotator, False, True)


def round_require_report_access(*, user, round: Round) -> RoundAccess:
    access = round_access(user=user, round=round)
    if not access.can_see_report:
        raise PermissionDenied(access.why_not)
    return access


def round_require_trace_shown(*, user, round: Round, trace_id: int) -> None:
    """Refuse to act (adjudicate, comment) on a trace of the round withheld from the user because
    she is labelling it blind again now (``round_withheld_trace_ids``): its card is not shown to
    her, so neither is what acting on it would answer."""
    if int(trace_id) in round_withheld_trace_ids(user=user, round=round):
        raise PermissionDenied(
            f"Trace {trace_id} is being labelled blind again in a draft or open round you label in: "
            "this round's work on it is withheld from you until that round goes to review."
        )


def round_require_agreement_access(*, user, round: Round) -> RoundAccess:
    """``round_require_report_access`` for the agreement report itself (kappa per mode, pooled,
    attribution): withheld entirely while some of the round's traces are labelled blind again
    by the user (``round_report_withheld``), since it is computed from their labels."""
    access = round_require_report_access(user=user, round=round)
    if why := round_report_withheld(user=user, round=round):
        raise PermissionDenied(why)
    return access


# --------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------


@dataclass
class AnnotatorProgress:
    user_id: int
    username: str
    submitted: int
    drafts: int
    total: int

    @property
    def percent(self) -> int:
        return int(100 * self.submitted / self.total) if self.total else 0


@dataclass
class RoundProgress:
    n_traces: int
    annotators: list[AnnotatorProgress]
    # (trace, {user_id: "submitted" | "draft" | ""}) rows of one page; only for those allowed details.
    rows: list[tuple[Trace, dict[int, str]]]
    page: Any = None  # that page (a Paginator page whose object_list is ``rows``)

    @property
    def submitted(self) -> int:
        return sum(a.submitted for a in self.annotators)

    @property
    def expected(self) -> int:
        return self.n_traces * len(self.annotators)

    @property
    def percent(self) -> int:
        return int(100 * self.submitted / self.expected) if self.expected else 0

    @property
    def complete(self) -> bool:
        return self.expected > 0 and self.submitted == self.expected


def round_progress(*, round: Round, details: bool = False, page: Any = None, per_page: int = 50) -> RoundProgress:
    """Who has submitted how much; with ``details`` (managers), which trace each has done, for one
    ``page`` of the round's traces (a 20,000-trace round built every row first: 1 s at 1 M traces)."""
    annotators = list(RoundAnnotator.objects.filter(round=round).select_related("user").order_by("user__username"))
    n_traces = RoundTrace.objects.filter(round=round).count()
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"submitted": 0, "draft": 0})
    for user_id, state, n in (
        Annotation.objects.filter(round=round, rater__user__isnull=False)
        .values_list("rater__user_id", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts[user_id][state] += n
    people = [
        AnnotatorProgress(
            a.user_id, a.user.username, counts[a.user_id]["submitted"], counts[a.user_id]["draft"], n_traces
        )
        for a in annotators
    ]
    if not details:
        return RoundProgress(n_traces, people, [])
    traces = (
        RoundTrace.objects.filter(round=round)
        .order_by("order", "pk")
        .select_related("trace")
        .only("order", "trace__id", "trace__title", "trace__external_id", "trace__mas_name", "trace__benchmark")
    )
    shown = Paginator(traces, per_page, allow_empty_first_page=True).get_page(page)
    ids = [rt.trace_id for rt in shown.object_list]
    states = {
        (u, t): s
        for u, t, s in Annotation.objects.filter(round=round, rater__user__isnull=False, trace_id__in=ids).values_list(
            "rater__user_id", "trace_id", "state"
        )
    }
    rows = [(rt.trace, {a.user_id: states.get((a.user_id, rt.trace_id), "") for a in annotators})
            for rt in shown.object_list]  # fmt: skip
    shown.object_list = rows
    return RoundProgress(n_traces, people, rows, shown)


# --------------------------------------------------------------------------------------
# The label matrix
# --------------------------------------------------------------------------------------


@dataclass
class LabelMatrix:
    """(raters x traces x modes) labels: 1 present, 0 absent, NaN missing or unsure."""

    labels: np.ndarray
    raters: list[str]
    rater_ids: list[int | None]
    trace_ids: list[int]
    modes: list[str]
    mode_ids: list[int]
    categories: dict[str, str]


def round_modes(*, version: TaxonomyVersion) -> list[FailureMode]:
    """The modes a round on ``version`` labels, in the taxonomy's display order."""
    return version_modes(version=version)


def round_human_raters(*, round: Round) -> list[tuple[Any, Rater | None]]:
    """(user, their Rater or None if they never labelled) for the round's annotators, by username."""
    users = [
        ra.user for ra in RoundAnnotator.objects.filter(round=round).select_related("user").order_by("user__username")
    ]
    existing = {r.user_id: r for r in Rater.objects.filter(user__in=users)}
    return [(u, existing.get(u.pk)) for u in users]


def round_extra_raters(*, round: Round) -> list[Rater]:
    """Non-human raters with submitted labels on the round's traces under its taxonomy version."""
    return list(
        Rater.objects.filter(
            annotations__round__isnull=True,
            annotations__taxonomy_version=round.taxonomy_version,
            annotations__trace__round_traces__round=round,
        )
        .exclude(kind=Rater.Kind.HUMAN)
        .distinct()
        .order_by("kind", "name")
    )


def rater_set_key(extra_rater_ids: Iterable[int] = ()) -> str:
    ids = sorted(set(int(i) for i in extra_rater_ids))
    return HUMANS if not ids else HUMANS + "+" + ",".join(map(str, ids))


def rater_set_parse(key: str) -> list[int]:
    """The extra rater ids of a rater-set key ("humans" or "humans+3,7")."""
    key = (key or HUMANS).strip()
    if key == HUMANS:
        return []
    head, _, tail = key.partition("+")
    if head != HUMANS or not tail:
        raise ValidationError(f"Unknown rater set {key!r}; expected 'humans' or 'humans+<rater ids>'.")
    try:
        return sorted({int(x) for x in tail.split(",") if x.strip()})
    except ValueError:
        raise ValidationError(f"Rater set {key!r}: rater ids must be integers.")


def round_label_matrix(*, round: Round, extra_rater_ids: Sequence[int] = ()) -> LabelMatrix:
    """Build the matrix from submitted annotations of the round (humans), plus, optionally,
    non-human raters' submitted labels on the same traces and taxonomy version (round=None)."""
    modes = round_modes(version=round.taxonomy_version)
    mode_index = {m.pk: j for j, m in enumerate(modes)}
    trace_ids = list(RoundTrace.objects.filter(round=round).order_by("order", "id").values_list("trace_id", flat=True))
    trace_index = {t: i for i, t in enumerate(trace_ids)}
    humans = round_human_raters(round=round)
    human_ids = [r.pk for _, r in humans if r is not None]
    extras: list[Rater] = []
    if extra_rater_ids:
        allowed = {r.pk: r for r in round_extra_raters(round=round)}
        unknown = [i for i in extra_rater_ids if i not in allowed]
        if unknown:
            raise ValidationError(
                f"Rater(s) {', '.join(map(str, unknown))} have no labels on this round's traces "
                f"with {round.taxonomy_version.label}."
            )
        extras = [allowed[i] for i in sorted(set(extra_rater_ids))]
    names = [u.username for u, _ in humans] + [r.name for r in extras]
    rater_ids = [r.pk if r else None for _, r in humans] + [r.pk for r in extras]
    rater_index = {rid: k for k, rid in enumerate(rater_ids) if rid is not None}
    labels = np.full((len(names), len(trace_ids), len(modes)), np.nan)

    def fill(rows: Iterable[tuple[int, int, int, str]]) -> None:
        rs, ts, ms, vs = [], [], [], []
        for rater_id, trace_id, mode_id, decision in rows:
            value = DECISION_VALUE.get(decision)
            if value is None or mode_id not in mode_index or trace_id not in trace_index:
                continue
            rs.append(rater_index[rater_id])
            ts.append(trace_index[trace_id])
            ms.append(mode_index[mode_id])
            vs.append(value)
        if rs:
            labels[np.array(rs), np.array(ts), np.array(ms)] = np.array(vs)

    cols = ("annotation__rater_id", "annotation__trace_id", "mode_id", "decision")
    fill(
        ModeLabel.objects.filter(
            annotation__round=round,
            annotation__state=Annotation.State.SUBMITTED,
            annotation__rater_id__in=human_ids,
        )
        .order_by()
        .values_list(*cols)
        .iterator(chunk_size=20000)
    )
    if extras:
        fill(
            ModeLabel.objects.filter(
                annotation__round__isnull=True,
                annotation__taxonomy_version=round.taxonomy_version,
                annotation__state=Annotation.State.SUBMITTED,
                annotation__rater_id__in=[r.pk for r in extras],
                annotation__trace_id__in=trace_ids,
            )
            .order_by()
            .values_list(*cols)
            .iterator(chunk_size=20000)
        )
    return LabelMatrix(
        labels=labels,
        raters=names,
        rater_ids=rater_ids,
        trace_ids=trace_ids,
        modes=[m.code for m in modes],
        mode_ids=[m.pk for m in modes],
        categories={m.code: m.category.code for m in modes},
    )


def round_labels_fingerprint_parts(*, round: Round, extra_rater_ids: Sequence[int] = ()) -> list[Any]:
    """What the stored report depends on, read from the round's annotation rows (never their
    mode labels: 5.6M of them at 100,000 traces made this check take 9 s).

    Every write of mode labels goes through an annotation save (``labels.services``: revision + 1,
    ``updated_at`` now), the bulk writers (``labels.bulk``, ``round_labels_import``: new or updated
    annotation rows) or the admin (which saves the annotation with its inline labels); so the
    annotations' count, latest ``updated_at`` and revision sum change with every label change.
    """
    human = Annotation.objects.filter(round=round)
    agg = human.aggregate(n=Count("id"), last=Max("updated_at"), revisions=Sum("revision"))
    parts: list[Any] = [
        round.taxonomy_version_id,
        RoundTrace.objects.filter(round=round).aggregate(n=Count("id"), s=Max("id"))["n"],
        sorted(RoundAnnotator.objects.filter(round=round).values_list("user_id", flat=True)),
        agg["n"],
        agg["revisions"],
        agg["last"].isoformat() if agg["last"] else None,
    ]
    if extra_rater_ids:
        extra = Annotation.objects.filter(
            round__isnull=True,
            taxonomy_version=round.taxonomy_version,
            rater_id__in=list(extra_rater_ids),
            trace__round_traces__round=round,
        ).aggregate(n=Count("id"), last=Max("updated_at"), revisions=Sum("revision"))
        parts += [
            list(extra_rater_ids),
            extra["n"],
            extra["revisions"],
            extra["last"].isoformat() if extra["last"] else None,
        ]
    return parts


def _trend_stat(stat: dict | None) -> dict[str, Any]:
    """A stored kappa with its CI as the trend draws it; ``why`` says why a value is missing."""
    stat = stat or {}
    ci = stat.get("ci") or [None, None]

    def num(v: Any) -> float | None:
        return None if v in (None, "", "null") else float(v)

    value = num(stat.get("value"))
    why = "" if value is not None else (stat.get("undefined") or "no report yet")
    return {"kappa": value, "lo": num(ci[0]), "hi": num(ci[1]), "why": why}


def round_kappa_trend(*, project: Project, user, imported: bool = False) -> list[dict[str, Any]]:
    """Agreement across the project's rounds: one row per round whose report ``user`` may open
    (``round_access``'s rule: an open round never shows, a round in review only to those who may
    read its report), in the order the rounds were opened. ``imported=False`` gives the project's
    own rounds, ``True`` the rounds an import rebuilt (MAST-Data's), so the two are drawn apart.

    A row carries the series the round measured: ``modes`` (the headline mean pairwise Cohen's
    kappa of the mode labels; None for an attribution round, whose mode labels are context) and
    ``attribution`` (the agent-level mean pairwise kappa; None when nobody attributed). Both are
    read from the stored human report. ``provisional`` marks a round in review: its labels may
    still change. ``version_changed`` is set on a round whose taxonomy version differs from the
    previous row's; ``revised`` lists, for a failure-mode round on a new version, the modes the
    mapping from the previous failure-mode round's version changed (edited, renamed, split,
    merged) with their kappa before and after."""

    shown = Round.objects.filter(project=project, state__in=[Round.State.REVIEW, Round.State.CLOSED])
    shown = list(shown.exclude(imported_from="") if imported else shown.filter(imported_from=""))
    role = project_role(user=user, project=project)
    mine = set(
        RoundAnnotator.objects.filter(round__in=[r.pk for r in shown], user_id=user.pk).values_list(
            "round_id", flat=True
        )
    )
    # reports withheld from her because they share a trace she is blind on now (``rounds_withheld``)
    withheld = set(rounds_withheld(user=user, project=project).values_list("pk", flat=True))
    rounds = sorted(
        (
            r
            for r in shown
            if r.pk not in withheld and _access(role=role, is_annotator=r.pk in mine, round=r).can_see_report
        ),
        key=lambda r: (r.opened_at or r.created_at, r.pk),
    )
    ids = [r.pk for r in rounds]
    reports = {
        r.round_id: r.data
        for r in AgreementReport.objects.filter(round_id__in=ids, rater_set=HUMANS).only("round_id", "data")
    }
    versions = {
        v.pk: v
        for v in TaxonomyVersion.objects.filter(pk__in={r.taxonomy_version_id for r in rounds}).select_related(
            "taxonomy"
        )
    }

    def per_mode(data: dict | None) -> dict[str, float | None]:
        return {m["mode"]: _trend_stat(m.get("mean_pairwise_kappa"))["kappa"] for m in (data or {}).get("per_mode", [])}

    rows: list[dict[str, Any]] = []
    prev = prev_modes = None
    for rnd in rounds:
        data = reports.get(rnd.pk)
        version = versions[rnd.taxonomy_version_id]
        measures_modes = rnd.kind != Round.Kind.ATTRIBUTION
        attribution = (data or {}).get("attribution")
        revised = []
        if measures_modes and prev_modes is not None and prev_modes.taxonomy_version_id != rnd.taxonomy_version_id:
            steps = mapping_steps(source_id=prev_modes.taxonomy_version_id, target=version) or []
            before, after = per_mode(reports.get(prev_modes.pk)), per_mode(data)
            if len(steps) == 1:
                for old, new, kind in steps[0]:
                    if kind in ("edit", "rename", "split", "merge") and old and new:
                        revised.append(
                            {"old": old, "new": new, "kind": kind, "before": before.get(old), "after": after.get(new)}
                        )
        rows.append(
            {
                "round": rnd,
                "provisional": rnd.state == Round.State.REVIEW,
                "modes": _trend_stat((data or {}).get("mean_pairwise_kappa")) if measures_modes else None,
                "attribution": _trend_stat(attribution["agent"]["mean_pairwise_kappa"]) if attribution else None,
                "version": version.label,
                "version_id": version.pk,
                "version_changed": prev is not None and rnd.taxonomy_version_id != prev.taxonomy_version_id,
                "revised": revised,
            }
        )
        prev = rnd
        prev_modes = rnd if measures_modes else prev_modes
    return rows


# --------------------------------------------------------------------------------------
# Units (the disagreement pages' reads are in annotations.rounds.disagreements)
# --------------------------------------------------------------------------------------


@dataclass
class Unit:
    trace_id: int
    mode_id: int
    # user_id -> decision ("present" | "absent" | "unsure" | "" when missing)
    decisions: dict[int, str]

    @property
    def unanimous(self) -> str | None:
        """The shared decision when every annotator said the same present/absent, else None."""
        values = set(self.decisions.values())
        if len(values) == 1:
            (v,) = values
            if v in (ModeLabel.Decision.PRESENT, ModeLabel.Decision.ABSENT):
                return v
        return None

    def majority(self) -> str | None:
        """Strict majority of the present/absent decisions; None on a tie or without votes."""
        votes = [int(v == ModeLabel.Decision.PRESENT) for v in self.decisions.values() if v in DECISION_VALUE]
        vote = majority_vote(votes)
        return None if vote is None else (ModeLabel.Decision.PRESENT if vote else ModeLabel.Decision.ABSENT)


def round_units(*, round: Round) -> list[Unit]:
    """Every (trace, mode) of the round with each annotator's submitted decision."""
    user_ids = list(RoundAnnotator.objects.filter(round=round).order_by("user_id").values_list("user_id", flat=True))
    trace_ids = list(RoundTrace.objects.filter(round=round).order_by("order", "id").values_list("trace_id", flat=True))
    mode_ids = [m.pk for m in round_modes(version=round.taxonomy_version)]
    got: dict[tuple[int, int], dict[int, str]] = defaultdict(dict)
    for user_id, trace_id, mode_id, decision in (
        ModeLabel.objects.filter(annotation__round=round, annotation__state=Annotation.State.SUBMITTED)
        .order_by()
        .values_list("annotation__rater__user_id", "annotation__trace_id", "mode_id", "decision")
        .iterator(chunk_size=20000)
    ):
        got[(trace_id, mode_id)][user_id] = decision
    return [Unit(t, m, {u: got.get((t, m), {}).get(u, "") for u in user_ids}) for t in trace_ids for m in mode_ids]


def round_open_disagreement_count(*, round: Round, user=None) -> int:
    """Units that still need a decision: raters differ (live, from the labels) and no adjudicator
    or majority decision exists yet. With ``user``, only the units of traces she may see
    (``round_withheld_trace_ids``)."""
    withheld = round_withheld_trace_ids(user=user, round=round) if user is not None else set()
    decided = set(
        Adjudication.objects.filter(round=round)
        .exclude(basis=Adjudication.Basis.UNANIMOUS)
        .values_list("trace_id", "mode_id")
    )
    return sum(
        1
        for u in round_units(round=round)
        if u.unanimous is None and (u.trace_id, u.mode_id) not in decided and u.trace_id not in withheld
    )


def project_annotator_choices(*, project: Project) -> QuerySet:
    """Members who may annotate (annotators and managers)."""

    return (
        get_user_model()
        .objects.filter(
            memberships__project=project,
            memberships__role__in=[Membership.Role.ANNOTATOR, Membership.Role.MANAGER],
            is_active=True,
        )
        .order_by("username")
    )


def round_versions_for_project(*, project: Project) -> QuerySet[TaxonomyVersion]:
    """Taxonomy versions a round may use: published ones and drafts (opening publishes a draft)."""
    return TaxonomyVersion.objects.select_related("taxonomy").order_by("taxonomy__name", "number")
