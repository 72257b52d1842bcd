"""Rows for the release and analytics tests, written directly (fast, and independent of the
workspace and round services, which have their own tests)."""

from __future__ import annotations

import hashlib
import itertools

from django.utils import timezone

from annotations.models import Adjudication, Annotation, ModeLabel, Rater, Round, RoundTrace
from traces.models import Trace

_n = itertools.count()


def make_trace(project, *, mas_name="ChatDev", llm_name="gpt-4o", benchmark="ProgramDev", raw_text=None, **kw) -> Trace:
    k = next(_n)
    raw = raw_text if raw_text is not None else f"Planner: plan {k}\nCoder: code {k}\nReviewer: fine {k}"
    return Trace.objects.create(
        project=project,
        mas_name=mas_name,
        llm_name=llm_name,
        benchmark=benchmark,
        format="plaintext",
        raw_text=raw,
        size_bytes=len(raw.encode()),
        content_hash=hashlib.sha256(raw.encode()).hexdigest(),
        external_id=kw.pop("external_id", f"t{k}"),
        **kw,
    )


def human_rater(user) -> Rater:
    rater, _ = Rater.objects.get_or_create(user=user, defaults={"kind": Rater.Kind.HUMAN, "name": user.username})
    return rater


def other_rater(name: str, kind: str = Rater.Kind.LLM) -> Rater:
    rater, _ = Rater.objects.get_or_create(name=name, defaults={"kind": kind})
    return rater


def annotate(
    trace, rater, version, decisions: dict[str, str], *, round=None, state="submitted", evidence=None, rationale=""
) -> Annotation:
    """decisions: {code: "present"|"absent"|"unsure"}; evidence/rationale go on present labels."""
    ann = Annotation.objects.create(
        trace=trace,
        rater=rater,
        taxonomy_version=version,
        round=round,
        state=state,
        submitted_at=timezone.now() if state == "submitted" else None,
    )
    modes = dict(version.modes.values_list("code", "id"))
    ModeLabel.objects.bulk_create(
        ModeLabel(
            annotation=ann,
            mode_id=modes[code],
            decision=d,
            evidence=(evidence or []) if d == "present" else [],
            rationale=rationale if d == "present" else "",
        )
        for code, d in decisions.items()
    )
    return ann


def all_codes(version) -> list[str]:
    return list(version.modes.order_by("order", "code").values_list("code", flat=True))


def decisions(version, present=()) -> dict[str, str]:
    return {c: "present" if c in present else "absent" for c in all_codes(version)}


def closed_round(project, version, adjudicated: dict, *, name=None, basis="adjudicated", state="closed") -> Round:
    """adjudicated: {trace: set of present codes}; every other mode of the version adjudicated absent."""
    rnd = Round.objects.create(
        project=project,
        name=name or f"Round {next(_n)}",
        taxonomy_version=version,
        state=state,
        closed_at=timezone.now() if state == "closed" else None,
    )
    modes = list(version.modes.values_list("code", "id"))
    for i, (trace, present) in enumerate(adjudicated.items()):
        RoundTrace.objects.create(round=rnd, trace=trace, order=i)
        Adjudication.objects.bulk_create(
            Adjudication(
                round=rnd, trace=trace, mode_id=mid, decision="present" if code in present else "absent", basis=basis
            )
            for code, mid in modes
        )
    return rnd
