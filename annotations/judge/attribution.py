"""The judge's failure attribution: storing it with the judge's annotation, and scoring it.

Scoring follows the Who&When paper (Zhang et al., ICML 2025): **agent-level accuracy** is the share
of failed traces whose responsible agent the judge names correctly, **step-level accuracy** the
share whose decisive step it names exactly. The reference of a trace is its agreed attribution
(the consensus of the latest closed round, ``annotations.rounds.attribution.consensus.agreed_attributions``);
where no round decided one, the ground truth an import brought (an imported source rater such as
"Who&When ground truth"), so a judge is scored against Who&When as soon as the file is imported.
A trace the judge answered without an attribution counts as wrong (as a method with no answer
does in the paper); traces the judge did not answer are left out. Agent names are compared
without case and surrounding space.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from annotations.judge.prompting import AttributionAnswer
from annotations.labels.visibility import annotations_visible_to
from annotations.models import Attribution, JudgeRun, Rater
from annotations.rounds.attribution.consensus import agreed_attributions
from traces.models import Step
from traces.sqlrows import sql_insert


def judge_attribution_write(
    *, annotation_id: int, trace_id: int, answer: AttributionAnswer | None, fresh: bool = False
) -> None:
    """Replace the judge annotation's attribution (inside the worker's transaction); ``fresh``: the
    annotation was created in this transaction, so it has none to delete yet."""
    if not fresh:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {Attribution._meta.db_table} WHERE annotation_id = %s", [annotation_id])  # noqa: S608
    if answer is None:
        return
    agent = answer.agent
    if not agent and answer.step is not None:
        agent = Step.objects.filter(trace_id=trace_id, index=answer.step).values_list("agent", flat=True).first() or ""
    sql_insert(
        Attribution,
        [
            {
                "annotation_id": annotation_id,
                "decisive_step": answer.step,
                "no_single_step": False,
                "agent": agent,
                "modes": [],
                "reason": answer.reason,
                "errors": [],
            }
        ],
    )


def _norm(agent: str) -> str:
    return " ".join((agent or "").split()).casefold()


def _ratio(hit: int, n: int) -> dict[str, Any]:
    return {"value": hit / n if n else None, "hit": hit, "n": n, "undefined": None if n else "no trace to compare"}


def attribution_accuracy(pairs: list[tuple[tuple[str, int | None], tuple[str, int | None] | None]]) -> dict[str, Any]:
    """Who&When's accuracies from (reference (agent, step), judge (agent, step) or None) pairs."""
    agent_n = agent_hit = step_n = step_hit = 0
    for (ref_agent, ref_step), judged in pairs:
        if ref_agent:
            agent_n += 1
            agent_hit += judged is not None and _norm(judged[0]) == _norm(ref_agent)
        if ref_step is not None:
            step_n += 1
            step_hit += judged is not None and judged[1] == ref_step
    return {"agent": _ratio(agent_hit, agent_n), "step": _ratio(step_hit, step_n)}


def judge_attribution_quality(*, run: JudgeRun, user) -> dict[str, Any] | None:
    """Agent- and step-level accuracy of the run's judge (None when no trace has a reference)."""
    if run.rater is None:
        return None
    project, ids = run.project, list(run.trace_ids)
    reference: dict[int, tuple[str, int | None, str]] = {}
    visible = annotations_visible_to(user=user, project=project).filter(round__isnull=True, trace_id__in=ids)
    for tid, agent, step, name in (
        Attribution.objects.filter(annotation__in=visible.filter(rater__kind=Rater.Kind.IMPORTED))
        .order_by("annotation__rater__name")
        .values_list("annotation__trace_id", "agent", "decisive_step", "annotation__rater__name")
    ):
        reference.setdefault(tid, (agent, step, name))
    for tid, d in agreed_attributions(project=project, trace_ids=ids).items():
        reference[tid] = (d.agent, d.decisive_step, "agreed")
    if not reference:
        return None
    answered = set(visible.filter(rater=run.rater).values_list("trace_id", flat=True))
    judged = {
        tid: (agent, step)
        for tid, agent, step in Attribution.objects.filter(annotation__in=visible.filter(rater=run.rater)).values_list(
            "annotation__trace_id", "agent", "decisive_step"
        )
    }
    pairs = [((r[0], r[1]), judged.get(tid)) for tid, r in sorted(reference.items()) if tid in answered]
    sources: dict[str, int] = {}
    for tid, r in reference.items():
        if tid in answered:
            sources[r[2]] = sources.get(r[2], 0) + 1
    return {
        **attribution_accuracy(pairs),
        "references": sources,
        "n_without_attribution": sum(1 for _, j in pairs if j is None),
    }
