"""Failure attribution in calibration rounds: the raters' attributions side by side, agreement,
consensus (unanimous / adjudicated / majority) and the project's agreed attribution.

Rules, chosen to mirror the failure modes (``annotations.rounds.services``):

* A round's attribution unit is a trace. A rater's answer there is the attribution of their
  submitted annotation: ``(no_single_step, decisive step, agent)``, or "not attributed". The
  attributed modes and the reason are carried along but are not compared (the modes are judged
  as mode labels already; reasons are free text).
* A trace on which no annotator attributed anything has no unit. Where every annotator gave the
  same answer, the consensus is written automatically (``basis=unanimous``; modes = those a
  strict majority named, reason = the raters' reasons). Every other unit is a disagreement.
* Adjudication (managers, in review) records the agreed attribution: a step (its agent taken from
  the step unless given) or "no single decisive step". Closing needs a decision for every
  disagreement, or "close with majority vote": a strict majority of the annotators' answers
  ("not attributed" counts as an answer, and when it wins no consensus row is written); a tie is
  refused, as for modes.
* The project's agreed attribution of a trace is the consensus of its most recently closed round
  that has one (``agreed_attributions``); releases, judge quality and analytics read it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from annotations.labels.visibility import annotations_visible_to, round_withheld_trace_ids
from annotations.models import Annotation, Attribution, AttributionDecision, Round, RoundAnnotator, RoundTrace
from annotations.rounds.attribution.agreement import attribution_agreement
from annotations.rounds.guards import round_lock, round_manager_require
from taxonomy.selectors import version_modes
from traces.models import Project, Step, Trace

Key = tuple[bool, int | None, str]  # (no_single_step, step, agent)


def _key(row: Any) -> Key:
    return (bool(row.no_single_step), row.decisive_step, (row.agent or "").strip())


def key_text(key: Key | None) -> str:
    if key is None:
        return "not attributed"
    none, step, agent = key
    return "no single decisive step" + (f" ({agent})" if agent else "") if none else f"step {step} · {agent or '?'}"


@dataclass
class AttributionUnit:
    trace_id: int
    answers: dict[int, Attribution | None]  # user id -> the rater's attribution (None: not attributed)
    submitted: set[int] = field(default_factory=set)

    def keys(self) -> dict[int, Key | None]:
        return {u: (_key(a) if a is not None else None) for u, a in self.answers.items()}

    @property
    def unanimous(self) -> Key | None:
        keys = set(self.keys().values())
        if len(keys) == 1 and len(self.submitted) == len(self.answers):
            (k,) = keys
            return k
        return None

    def majority(self) -> tuple[bool, Key | None]:
        """(decided, key): a strict majority of the answers; key None = "not attributed" won."""
        votes = Counter(self.keys().values())
        if not votes:
            return False, None
        (top, n), *rest = votes.most_common()
        if rest and rest[0][1] == n:
            return False, None
        return n * 2 > sum(votes.values()), top


def round_attribution_units(*, round: Round) -> list[AttributionUnit]:
    """Per trace of the round, each annotator's attribution (submitted annotations only); traces
    nobody attributed are left out (one query when nobody attributed anything in the round)."""
    if not Attribution.objects.filter(annotation__round=round, annotation__state=Annotation.State.SUBMITTED).exists():
        return []
    users = list(RoundAnnotator.objects.filter(round=round).order_by("user_id").values_list("user_id", flat=True))
    traces = list(RoundTrace.objects.filter(round=round).order_by("order", "id").values_list("trace_id", flat=True))
    got: dict[int, dict[int, Attribution]] = {}
    submitted: dict[int, set[int]] = {}
    for ann in (
        Annotation.objects.filter(round=round, state=Annotation.State.SUBMITTED)
        .select_related("attribution", "rater")
        .only("trace_id", "rater__user_id", "attribution")
    ):
        submitted.setdefault(ann.trace_id, set()).add(ann.rater.user_id)
        row = getattr(ann, "attribution", None)
        if row is not None:
            got.setdefault(ann.trace_id, {})[ann.rater.user_id] = row
    return [
        AttributionUnit(t, {u: got[t].get(u) for u in users}, submitted.get(t, set()) & set(users))
        for t in traces
        if t in got
    ]


def round_attribution_report(*, round: Round, n_boot: int, seed: int) -> dict[str, Any] | None:
    """The attribution section of the round's agreement report (None when nobody attributed)."""
    units = round_attribution_units(round=round)
    if not units:
        return None
    users = sorted(
        RoundAnnotator.objects.filter(round=round).values_list("user_id", "user__username"), key=lambda kv: kv[1]
    )
    agents, steps, nones = [], [], []
    for uid, _ in users:
        row_a, row_s, row_n = [], [], []
        for u in units:
            a = u.answers.get(uid)
            row_a.append((a.agent or "").strip() or None if a is not None else None)
            row_s.append(a.decisive_step if a is not None else None)
            row_n.append(bool(a and a.no_single_step))
        agents.append(row_a)
        steps.append(row_s)
        nones.append(row_n)
    data = attribution_agreement(
        agents=agents, steps=steps, none=nones, raters=[name for _, name in users], n_boot=n_boot, seed=seed
    )
    data["n_disagreements"] = sum(1 for u in units if u.unanimous is None)
    return data


# --------------------------------------------------------------------------------------
# Consensus
# --------------------------------------------------------------------------------------


def _majority_modes(rows: list[Attribution]) -> list[str]:
    counts = Counter(code for r in rows for code in r.modes)
    return sorted(c for c, n in counts.items() if n * 2 > len(rows))


def _joined_reasons(unit: AttributionUnit, names: dict[int, str]) -> str:
    return "\n".join(f"{names.get(u, u)}: {a.reason}" for u, a in unit.answers.items() if a is not None and a.reason)


def attribution_consensus_sync(*, round: Round) -> int:
    """Unanimous attributions become consensus rows; stale unanimous rows go. Idempotent."""
    names = dict(RoundAnnotator.objects.filter(round=round).values_list("user_id", "user__username"))
    rows = {d.trace_id: d for d in AttributionDecision.objects.filter(round=round)}
    created = 0
    for u in round_attribution_units(round=round):
        row, key = rows.pop(u.trace_id, None), u.unanimous
        if row is not None and row.basis != AttributionDecision.Basis.UNANIMOUS:
            continue
        if key is None:
            if row is not None:
                row.delete()
            continue
        answers = [a for a in u.answers.values() if a is not None]
        values = {
            "no_single_step": key[0],
            "decisive_step": key[1],
            "agent": key[2],
            "modes": _majority_modes(answers),
            "reason": _joined_reasons(u, names),
            "basis": AttributionDecision.Basis.UNANIMOUS,
        }
        AttributionDecision.objects.update_or_create(round=round, trace_id=u.trace_id, defaults=values)
        created += row is None
    # Units that disappeared (someone changed their answer to "not attributed" everywhere).
    AttributionDecision.objects.filter(
        pk__in=[r.pk for r in rows.values() if r.basis == AttributionDecision.Basis.UNANIMOUS]
    ).delete()
    return created


def attribution_pending(*, round: Round) -> list[AttributionUnit]:
    decided = set(AttributionDecision.objects.filter(round=round).values_list("trace_id", flat=True))
    return [u for u in round_attribution_units(round=round) if u.unanimous is None and u.trace_id not in decided]


def attribution_close_with_majority(*, round: Round, by=None) -> None:
    """Decide the pending attribution disagreements by strict majority; refuse ties (see module)."""
    pending = attribution_pending(round=round)
    ties = [u.trace_id for u in pending if not u.majority()[0]]
    if ties:
        shown = ", ".join(map(str, ties[:10]))
        raise ValidationError(
            f"{len(ties)} attribution disagreement(s) have no strict majority (traces {shown}). "
            "Adjudicate them, then close with majority vote."
        )
    for u in pending:
        _, key = u.majority()
        if key is None:
            continue  # most annotators did not attribute: no agreed attribution
        rows = [a for a in u.answers.values() if a is not None and _key(a) == key]
        AttributionDecision.objects.create(
            round=round,
            trace_id=u.trace_id,
            no_single_step=key[0],
            decisive_step=key[1],
            agent=key[2],
            modes=_majority_modes(rows),
            basis=AttributionDecision.Basis.MAJORITY,
            note="Closed with majority vote.",
            by=by,
        )


@transaction.atomic
def attribution_adjudicate(
    *,
    round: Round,
    trace: Trace | int,
    step: int | None,
    no_single_step: bool = False,
    agent: str = "",
    modes: list[str] | None = None,
    reason: str = "",
    note: str = "",
    by=None,
) -> AttributionDecision:
    """The adjudicator's agreed attribution for one trace of a round in review (an upsert)."""
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    if rnd.state != Round.State.REVIEW:
        raise ValidationError(f"Adjudication happens in review; round {rnd.name!r} is {rnd.state}.")
    trace_id = trace if isinstance(trace, int) else trace.pk
    if not RoundTrace.objects.filter(round=rnd, trace_id=trace_id).exists():
        raise ValidationError(f"Trace {trace_id} is not in round {rnd.name!r}.")
    if no_single_step == (step is not None):
        raise ValidationError("Give the decisive step, or choose 'no single decisive step' (one of the two).")
    if step is not None:
        step_agent = Step.objects.filter(trace_id=trace_id, index=step).values_list("agent", flat=True).first()
        if step_agent is None:
            n = Trace.objects.filter(pk=trace_id).values_list("n_steps", flat=True).first()
            raise ValidationError(f"Step {step} does not exist in trace {trace_id} (it has {n} steps).")
        agent = (agent or "").strip() or step_agent
    codes = {m.code for m in version_modes(version=rnd.taxonomy_version)}
    unknown = [c for c in modes or [] if c not in codes]
    if unknown:
        raise ValidationError(f"Unknown mode code(s) {', '.join(unknown)} for {rnd.taxonomy_version.label}.")
    decision, _ = AttributionDecision.objects.update_or_create(
        round=rnd,
        trace_id=trace_id,
        defaults={
            "no_single_step": no_single_step,
            "decisive_step": step,
            "agent": " ".join((agent or "").split())[:200],
            "modes": sorted(set(modes or [])),
            "reason": (reason or "").strip()[:2000],
            "note": (note or "").strip(),
            "basis": AttributionDecision.Basis.ADJUDICATED,
            "by": by,
        },
    )
    return decision


# --------------------------------------------------------------------------------------
# Reading disagreements (through the blind rule) and the agreed attribution
# --------------------------------------------------------------------------------------


@dataclass
class RaterAttribution:
    username: str
    value: Attribution | None
    hidden: bool = False

    @property
    def text(self) -> str:
        if self.hidden:
            return "hidden"
        return key_text(_key(self.value) if self.value is not None else None)


@dataclass
class AttributionDisagreement:
    trace: Trace
    raters: list[RaterAttribution]
    decision: AttributionDecision | None
    majority: str

    @property
    def key(self) -> str:
        return str(self.trace.pk)


def round_attribution_disagreements(*, round: Round, user, status: str = "all", trace_id: int | None = None):
    """Attribution disagreements of the round with each rater's answer, as the user may see them:
    none of a trace she is labelling blind again now (``round_withheld_trace_ids``)."""
    withheld = round_withheld_trace_ids(user=user, round=round)
    units = [u for u in round_attribution_units(round=round) if u.unanimous is None and u.trace_id not in withheld]
    if trace_id is not None:
        units = [u for u in units if u.trace_id == trace_id]
    if not units:
        return []
    decisions = {
        d.trace_id: d
        for d in AttributionDecision.objects.filter(round=round)
        .exclude(basis=AttributionDecision.Basis.UNANIMOUS)
        .select_related("by")
    }
    if status == "open":
        units = [u for u in units if u.trace_id not in decisions]
    elif status == "decided":
        units = [u for u in units if u.trace_id in decisions]
    if not units:
        return []
    ids = [u.trace_id for u in units]
    visible = set(
        annotations_visible_to(
            user=user, project=round.project, qs=Annotation.objects.filter(round=round, trace_id__in=ids)
        ).values_list("trace_id", "rater__user_id")
    )
    users = sorted(
        RoundAnnotator.objects.filter(round=round).values_list("user_id", "user__username"), key=lambda kv: kv[1]
    )
    traces = Trace.objects.only("id", "project_id", "title", "external_id", "n_steps").in_bulk(ids)
    out = []
    for u in units:
        raters = []
        for uid, name in users:
            seen = (u.trace_id, uid) in visible
            raters.append(RaterAttribution(name, u.answers.get(uid) if seen else None, hidden=not seen))
        decided, key = u.majority()
        out.append(
            AttributionDisagreement(
                trace=traces[u.trace_id],
                raters=raters,
                decision=decisions.get(u.trace_id),
                majority=key_text(key) if decided else "",
            )
        )
    return out


def agreed_attributions(
    *, project: Project, trace_ids=None, round: Round | None = None
) -> dict[int, AttributionDecision]:
    """trace id -> the agreed attribution: the consensus of the latest closed round that has one
    (or of ``round`` only)."""
    qs = AttributionDecision.objects.filter(round__project=project, round__state=Round.State.CLOSED)
    if round is not None:
        qs = qs.filter(round=round)
    if trace_ids is not None:
        qs = qs.filter(trace_id__in=list(trace_ids))
    out: dict[int, AttributionDecision] = {}
    for d in qs.select_related("round").order_by("round__closed_at", "round_id"):
        out[d.trace_id] = d
    return out


def attribution_export(decisions: dict[int, AttributionDecision]) -> dict[int, dict[str, Any]]:
    """The agreed attributions as releases carry them: step id (``traces.Step`` id) and index,
    agent, modes, reason, no_single_step, basis and round."""
    pairs = [(t, d.decisive_step) for t, d in decisions.items() if d.decisive_step is not None]
    step_ids: dict[tuple[int, int], int] = {}
    if pairs:
        rows = Step.objects.filter(trace_id__in={t for t, _ in pairs}, index__in={i for _, i in pairs})
        step_ids = {(t, i): pk for pk, t, i in rows.values_list("id", "trace_id", "index")}
    return {
        t: {
            "step_id": step_ids.get((t, d.decisive_step)),
            "step_index": d.decisive_step,
            "no_single_step": d.no_single_step,
            "agent": d.agent,
            "modes": list(d.modes),
            "reason": d.reason,
            "basis": d.basis,
            "round": d.round.name,
        }
        for t, d in decisions.items()
    }
