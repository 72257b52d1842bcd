"""Reads for reviewing a round's disagreements: each rater's label side by side, adjudications
and discussion, loaded lazily one page at a time. Labels pass through the blind rule
(``annotations_visible_to``) for the viewer, and so does the round's own work: a trace that she is
labelling blind again in a draft or open round (``round_withheld_trace_ids``) is left out of the
units, the consensus and the discussion, and every count is made of what is left."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import QuerySet
from django.db.models.functions import Left

from annotations.labels.visibility import annotations_visible_to, round_withheld_trace_ids, round_work_visible_to
from annotations.models import Adjudication, Annotation, DisagreementComment, ModeLabel, Round, RoundAnnotator
from annotations.rounds.selectors import Unit, round_modes, round_units
from taxonomy.models import FailureMode
from traces.models import Step, Trace


@dataclass
class RaterLabel:
    username: str
    decision: str
    evidence: list
    rationale: str
    confidence: float | None


@dataclass
class Disagreement:
    trace: Trace
    mode: FailureMode
    labels: list[RaterLabel]
    adjudication: Adjudication | None
    comments: list[DisagreementComment]
    majority: str | None

    @property
    def first_step(self) -> int | None:
        for lab in self.labels:
            for ev in lab.evidence or []:
                if isinstance(ev, dict) and isinstance(ev.get("step"), int):
                    return ev["step"]
        return None

    @property
    def key(self) -> str:
        # Used as an HTML id and in CSS selectors (htmx targets): no dots.
        return f"{self.trace.pk}-{self.mode.code}".replace(".", "_")


class DisagreementList(Sequence):
    """The disagreements of a round as a lazy sequence: ``len()`` is cheap (units only) and a
    slice loads labels, comments and traces for just that slice, so a paginator (Django's or
    DRF's) reads one page of a 1,642-trace round, not all of it."""

    def __init__(
        self, *, round: Round, user, units: list[Unit], adjudications: dict, modes: dict, n_open: int = 0
    ) -> None:
        self.round, self.user, self.units = round, user, units
        self.adjudications, self.modes = adjudications, modes
        self.n_open = n_open  # units of the whole round still needing a decision (before filters)

    def __len__(self) -> int:
        return len(self.units)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._detail(self.units[index])
        return self._detail([self.units[index]])[0]

    def __iter__(self):
        return iter(self._detail(self.units))

    def _detail(self, units: list[Unit]) -> list[Disagreement]:
        if not units:
            return []
        rnd = self.round
        trace_ids = {u.trace_id for u in units}
        mode_ids = {u.mode_id for u in units}
        visible = annotations_visible_to(
            user=self.user, project=rnd.project, qs=Annotation.objects.filter(round=rnd, trace_id__in=trace_ids)
        ).filter(state=Annotation.State.SUBMITTED)
        labels: dict[tuple[int, int], dict[int, ModeLabel]] = defaultdict(dict)
        for lab in ModeLabel.objects.filter(annotation__in=visible, mode_id__in=mode_ids).select_related(
            "annotation__rater"
        ):
            labels[(lab.annotation.trace_id, lab.mode_id)][lab.annotation.rater.user_id] = lab
        users = sorted(
            RoundAnnotator.objects.filter(round=rnd).values_list("user_id", "user__username"), key=lambda kv: kv[1]
        )
        comments: dict[tuple[int, int], list[DisagreementComment]] = defaultdict(list)
        discussion = round_work_visible_to(
            user=self.user, round=rnd, qs=DisagreementComment.objects.filter(round=rnd, trace_id__in=trace_ids)
        )
        for c in discussion.select_related("author"):
            comments[(c.trace_id, c.mode_id)].append(c)
        # Trace text can be megabytes: only what the page shows.
        traces = Trace.objects.only("id", "project_id", "title", "external_id", "mas_name").in_bulk(trace_ids)
        out = []
        for u in units:
            key = (u.trace_id, u.mode_id)
            row = []
            for uid, username in users:
                lab = labels[key].get(uid)
                row.append(
                    RaterLabel(
                        username=username,
                        decision=lab.decision if lab else ("hidden" if u.decisions.get(uid) else ""),
                        evidence=lab.evidence if lab else [],
                        rationale=lab.rationale if lab else "",
                        confidence=lab.confidence if lab else None,
                    )
                )
            out.append(
                Disagreement(
                    trace=traces[u.trace_id],
                    mode=self.modes[u.mode_id],
                    labels=row,
                    adjudication=self.adjudications.get(key),
                    comments=comments.get(key, []),
                    majority=u.majority(),
                )
            )
        return out


def round_disagreements(
    *, round: Round, user, mode_code: str | None = None, status: str = "all", trace_id: int | None = None
) -> DisagreementList:
    """Every (trace, mode) where the round's raters differ (or someone was unsure / missing),
    with each rater's label side by side. Labels pass through the blind rule for the viewer.

    ``status``: "all", "open" (no consensus yet) or "decided" (adjudicated).
    Units decided unanimously are not disagreements and never appear here.
    Returns a lazy sequence (see ``DisagreementList``): slice it to page it.
    """
    withheld = round_withheld_trace_ids(user=user, round=round)
    units = [u for u in round_units(round=round) if u.unanimous is None and u.trace_id not in withheld]
    adjudications = {
        (a.trace_id, a.mode_id): a
        for a in round_adjudications(round=round, user=user)
        .exclude(basis=Adjudication.Basis.UNANIMOUS)
        .select_related("by")
    }
    n_open = sum(1 for u in units if (u.trace_id, u.mode_id) not in adjudications)
    if trace_id is not None:
        units = [u for u in units if u.trace_id == trace_id]
    modes = {m.pk: m for m in round_modes(version=round.taxonomy_version)}
    if mode_code:
        units = [u for u in units if modes[u.mode_id].code == mode_code]
    if status == "open":
        units = [u for u in units if (u.trace_id, u.mode_id) not in adjudications]
    elif status == "decided":
        units = [u for u in units if (u.trace_id, u.mode_id) in adjudications]
    return DisagreementList(
        round=round, user=user, units=units, adjudications=adjudications, modes=modes, n_open=n_open
    )


def disagreement_evidence_steps(*, items: Sequence[Disagreement], chars: int = 400) -> dict[tuple[int, int], Step]:
    """{(trace id, step index): step} for every step a rater gave as evidence in ``items``, with
    only the first ``chars`` characters of its content (a step can hold megabytes) as ``excerpt``."""
    wanted: dict[int, set[int]] = defaultdict(set)
    for d in items:
        for lab in d.labels:
            for ev in lab.evidence or []:
                if isinstance(ev, dict) and isinstance(ev.get("step"), int):
                    wanted[d.trace.pk].add(ev["step"])
    found: dict[tuple[int, int], Step] = {}
    for trace_id, indexes in wanted.items():
        for step in (
            Step.objects.filter(trace_id=trace_id, index__in=indexes)
            .only("trace_id", "index", "agent", "kind")
            .annotate(excerpt=Left("content", chars))
        ):
            found[(trace_id, step.index)] = step
    return found


def round_adjudications(*, round: Round, user) -> QuerySet[Adjudication]:
    """The round's consensus rows that ``user`` may see (none of a trace she is blind on now)."""
    return (
        round_work_visible_to(user=user, round=round, qs=Adjudication.objects.filter(round=round))
        .select_related("mode", "by", "trace")
        .order_by("trace_id", "mode__order", "mode__code")
    )
