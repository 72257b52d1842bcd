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

Every page and API endpoint that shows labels filters through ``annotations_visible_to``; what
is derived from the labels of blind traces (open codes, "labelled" marks) uses ``blind_trace_ids``.
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


def blind_trace_ids(*, user, project: Project, role: str | None = None):
    """Subquery of the project's trace ids whose other raters' work the user must not see now:
    traces of draft or open rounds (for a manager, only the rounds they label in themselves)."""
    role = role or project_role(user=user, project=project)
    qs = open_round_traces(project=project)
    if role == Membership.Role.MANAGER:
        qs = qs.filter(round__round_annotators__user=user)
    return qs.values("trace_id")


def annotations_visible_to(*, user, project: Project, qs: QuerySet[Annotation] | None = None) -> QuerySet[Annotation]:
    qs = Annotation.objects.filter(trace__project=project) if qs is None else qs
    role = project_role(user=user, project=project)
    if role is None:
        return qs.none()
    own = Q(rater__user_id=user.pk)
    blind_traces = blind_trace_ids(user=user, project=project, role=role)
    if role == Membership.Role.MANAGER:
        return qs.filter(own | ~Q(trace_id__in=blind_traces))
    revealed = Q(round__state__in=["review", "closed"], round__reveal_in_review=True)
    if project.reveal_suggestions:
        revealed |= Q(round__isnull=True, rater__kind__in=NON_HUMAN)
    return qs.filter(own | (revealed & ~Q(trace_id__in=blind_traces)))


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
    qs = annotations_visible_to(user=user, project=project, qs=qs)
    if project_role(user=user, project=project) != Membership.Role.ANNOTATOR:
        return qs
    submitted = Annotation.objects.filter(rater__user_id=user.pk, state=Annotation.State.SUBMITTED).values("trace_id")
    keep = Q(rater__user_id=user.pk) | Q(trace_id__in=submitted)
    if project.reveal_suggestions:
        keep |= Q(round__isnull=True, rater__kind__in=NON_HUMAN)
    return qs.filter(keep)
