"""The blind rule, in one place: which annotations a user may see.

- Everyone sees their own annotations.
- While a trace belongs to a draft or open round, nobody but its author sees an annotation
  of it (nothing can reveal it), except managers who are not annotators of that open round.
- Round annotations become visible to project members once the round is in review or closed,
  if the manager allowed it for that round (``Round.reveal_in_review``).
- Outside rounds, non-human raters' labels (LLM judge, baseline, imported sources) are shown
  as suggestions only where the project's manager turned ``Project.reveal_suggestions`` on;
  other humans' labels outside rounds stay hidden from annotators and viewers.
- Managers (and site admins) see everything else: they adjudicate.

The rule is ONE function, ``work_visible``: a filter on any row of raters' work (annotations,
their open codes, a round's consensus and its discussion) that every page, API, file and count goes
through; ``annotations_visible_to``, ``annotations_visible_across``, the agreed labels, the open
codes, the "labelled" marks, the rounds' reviews and reports, releases and the judge comparison's
reference are all written with it (or with ``blind_trace_ids``, its one definition of "labelled
blind now").

Earlier rounds: a trace can be in an earlier round (in review or closed) and in a draft or open
one. While it is, that earlier round's work on the trace (labels, consensus, notes, comments,
open codes) is withheld from everyone who is blind on it, row by row, and counts are made of
what is shown; its agreement report (kappa per mode, pooled, attribution) is withheld entirely
(``round_report_withheld``): a kappa computed without those traces, beside the one computed with
them that she may have seen before, would tell how the raters agreed on them.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotations.models import Annotation, Rater, Round, RoundTrace
from traces.models import Membership, Project
from traces.projects.selectors import project_role

NON_HUMAN = [Rater.Kind.LLM, Rater.Kind.BASELINE, Rater.Kind.IMPORTED]


# The round states in which a round's traces are labelled blind: the one definition.
BLIND_ROUND_STATES = (Round.State.DRAFT, Round.State.OPEN)


def open_round_traces(*, project: Project) -> QuerySet[RoundTrace]:
    """The project's traces in draft or open rounds, i.e. being labelled blind right now. Nothing
    shared with several people (releases, exports) may carry labels of these traces."""
    return RoundTrace.objects.filter(round__project=project, round__state__in=BLIND_ROUND_STATES)


def blind_round_traces(*, user, project: Project, role: str | None = None) -> QuerySet[RoundTrace]:
    """The (round, trace) rows that make the user blind on a trace now: those of draft or open
    rounds (for a manager, only the rounds she labels in herself)."""
    role = role or project_role(user=user, project=project)
    qs = open_round_traces(project=project)
    if role == Membership.Role.MANAGER:
        qs = qs.filter(round__round_annotators__user=user)
    return qs


def blind_trace_ids(*, user, project: Project, role: str | None = None):
    """Subquery of the project's trace ids whose other raters' work the user must not see now:
    traces of draft or open rounds (for a manager, only the rounds they label in themselves)."""
    return blind_round_traces(user=user, project=project, role=role).values("trace_id")


def work_visible(
    *, user, project: Project, role: str | None = None, prefix: str = "", rater: bool = True, anchoring: bool = False
) -> Q:
    """THE blind rule: a filter on rows of raters' work that ``user`` may see in ``project``.

    The rows have ``<prefix>trace_id`` and ``<prefix>round`` and, with ``rater`` (annotations),
    ``<prefix>rater``: ``prefix=""`` filters annotations, adjudications and comments,
    ``prefix="annotations__"`` open codes through their annotations. ``rater=False`` for a round's
    own work (consensus, discussion), which belongs to no single rater and follows its round.

    - Her own annotations, always.
    - Nothing of a trace she is blind on now (``blind_trace_ids``), from any round or none.
    - Managers: everything else.
    - Annotators and viewers: rounds in review or closed whose manager revealed them, and
      non-human suggestions outside rounds where ``Project.reveal_suggestions`` is on.
    - ``anchoring``: an annotator sees another rater's annotation of a trace only once she has
      submitted her own of it (anti-anchoring, for lists across many traces).
    Non-members see nothing.
    """
    role = role or project_role(user=user, project=project)
    never = Q(pk__isnull=True)  # the row's own key is never null
    if role is None:
        return never
    p = prefix
    own = Q(**{f"{p}rater__user_id": user.pk}) if rater else never
    shown = ~Q(**{f"{p}trace_id__in": blind_trace_ids(user=user, project=project, role=role)})
    if role != Membership.Role.MANAGER:
        revealed = Q(**{f"{p}round__state__in": ["review", "closed"], f"{p}round__reveal_in_review": True})
        if rater and project.reveal_suggestions:
            revealed |= Q(**{f"{p}round__isnull": True, f"{p}rater__kind__in": NON_HUMAN})
        shown &= revealed
        if anchoring and role == Membership.Role.ANNOTATOR:
            submitted = Annotation.objects.filter(rater__user_id=user.pk, state=Annotation.State.SUBMITTED)
            keep = Q(**{f"{p}trace_id__in": submitted.values("trace_id")})
            if rater and project.reveal_suggestions:
                keep |= Q(**{f"{p}round__isnull": True, f"{p}rater__kind__in": NON_HUMAN})
            shown &= keep
    return own | shown


def annotations_visible_to(*, user, project: Project, qs: QuerySet[Annotation] | None = None) -> QuerySet[Annotation]:
    qs = Annotation.objects.filter(trace__project=project) if qs is None else qs
    return qs.filter(work_visible(user=user, project=project))


def round_work_visible_to(*, user, round: Round, qs: QuerySet) -> QuerySet:
    """A round's consensus rows or discussion (``Adjudication``, ``DisagreementComment``) that the
    user may see: none of a trace she is blind on now (``work_visible`` with ``rater=False``)."""
    return qs.filter(work_visible(user=user, project=round.project, rater=False))


def round_withheld_trace_ids(*, user, round: Round, role: str | None = None) -> set[int]:
    """The traces of ``round`` (in review or closed) that the user is blind on now, because a draft
    or open round labels them again: the round's work on them is withheld from her."""
    if round.state in BLIND_ROUND_STATES:
        return set()  # the round itself is blind: ``round_access`` answers for it
    cache = round.__dict__.setdefault("_withheld_for", {})  # one read per round object and user
    if user.pk not in cache:
        blind = blind_trace_ids(user=user, project=round.project, role=role)
        cache[user.pk] = set(
            RoundTrace.objects.filter(round=round, trace_id__in=blind).values_list("trace_id", flat=True)
        )
    return cache[user.pk]


def rounds_withheld(*, user, project: Project, role: str | None = None) -> QuerySet[Round]:
    """Subquery of the project's rounds in review or closed that share a trace with what the user
    is blind on now: their agreement reports (kappa, per mode, pooled) are withheld from her."""
    blind = blind_trace_ids(user=user, project=project, role=role)
    return (
        Round.objects.filter(project=project, round_traces__trace_id__in=blind)
        .exclude(state__in=BLIND_ROUND_STATES)
        .values("pk")
    )


def round_report_withheld(*, user, round: Round) -> str:
    """Why the round's agreement report is withheld from the user, or "" when it is not: the report
    is computed from every trace of the round, some of which she is labelling blind now."""
    n = len(round_withheld_trace_ids(user=user, round=round))
    if not n:
        return ""
    return (
        f"{n} of this round's traces {'is' if n == 1 else 'are'} being labelled blind again in a draft or open "
        "round: its agreement report is withheld until that round goes to review."
    )


def reference_visible_to(
    *, user, project: Project, reference: dict[tuple[int, str], int]
) -> dict[tuple[int, str], int]:
    """A reference of agreed labels keyed (trace id, mode code), without the traces the user is
    blind on now: what a comparison against a round's (or the project's) consensus may use."""
    blind = set(blind_trace_ids(user=user, project=project).values_list("trace_id", flat=True))
    return {k: v for k, v in reference.items() if k[0] not in blind}


def trace_is_blind(*, trace_id: int) -> bool:
    """True while the trace belongs to a draft or open round."""
    return RoundTrace.objects.filter(trace_id=trace_id, round__state__in=BLIND_ROUND_STATES).exists()


def anchoring_holds_back(
    *, user, project: Project, trace_id: int, role: str | None = None, submitted: bool | None = None
) -> bool:
    """Anti-anchoring, on top of the blind rule: an annotator sees other raters' labels on a trace
    only once she has submitted her own annotation of it (any version or round), so that what she
    decides is her own reading, not a reaction to a peer's. Until then they are held back.

    The one exception is pre-labelling: where a manager turned ``Project.reveal_suggestions`` on,
    non-human suggestions outside rounds (LLM judge, baseline, imported sources) show at once;
    humans' labels (e.g. from a closed round she was not in) still wait for her submission.
    Managers and viewers are not held back: managers adjudicate, viewers do not label.
    ``submitted``: whether she has submitted an annotation of the trace, when the caller read it
    already (``annotations.labels.page_sql.page_mine``).
    """
    role = role or project_role(user=user, project=project)
    if role != Membership.Role.ANNOTATOR:
        return False
    if submitted is not None:
        return not submitted
    return not Annotation.objects.filter(
        trace_id=trace_id, rater__user_id=user.pk, state=Annotation.State.SUBMITTED
    ).exists()


def anchoring_filter(*, project: Project, qs: QuerySet[Annotation]) -> QuerySet[Annotation]:
    """What an annotator held back by ``anchoring_holds_back`` may still see of ``qs``."""
    if not project.reveal_suggestions:
        return qs.none()
    return qs.filter(round__isnull=True, rater__kind__in=NON_HUMAN)


def annotations_visible_across(
    *, user, project: Project, qs: QuerySet[Annotation] | None = None
) -> QuerySet[Annotation]:
    """``annotations_visible_to`` for pages that list the labels of many traces at once (the open
    codes page), with anti-anchoring applied trace by trace: an annotator sees another rater's
    annotation of a trace only once she has submitted her own annotation of that trace (or, with
    "reveal suggestions" on, a non-human suggestion outside rounds), as ``anchoring_filter`` rules
    for one trace. Managers and viewers get ``annotations_visible_to`` unchanged."""
    qs = Annotation.objects.filter(trace__project=project) if qs is None else qs
    return qs.filter(work_visible(user=user, project=project, anchoring=True))
