"""Reads for the LLM judge: runs, their progress, prompt versions, and the judge's quality.

Quality compares a judge rater's labels with the humans' agreed labels (the consensus of closed
rounds) carried onto the version the run labelled through the recorded mappings
(``agreed_labels_on_version``; the result says how many came through a mapping), on the traces
both have, per mode and pooled over all (trace, mode)
units, in the layout of the MAST paper's Table 2: accuracy, precision, recall, F1, Cohen's kappa.
Labels are read through ``annotations_visible_to``: a manager who annotates an open round does not
see the judge's labels of that round's traces here either. Traces whose reference labels the
judge saw (few-shot examples) are left out (``excluded.scored_trace_exclusions``) and counted.

The last reads are what a run works on: a version's modes, a trace's steps and text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from annotations.judge import prompting
from annotations.judge.attribution import judge_attribution_quality
from annotations.judge.excluded import cross_fit_note, scored_trace_exclusions
from annotations.labels.visibility import annotations_visible_to, reference_visible_to
from annotations.models import JudgeItem, JudgeRun, ModeLabel, PromptTemplate
from annotations.rounds.agreed import agreed_labels_on_version
from annotations.rounds.agreement import cohen_kappa
from taxonomy.models import FailureMode
from traces.models import Project, Step, Trace


def judge_run_list(*, project: Project) -> QuerySet[JudgeRun]:
    return (
        JudgeRun.objects.filter(project=project)
        .select_related("prompt", "rater", "created_by")
        .order_by("-created_at", "-id")
    )


def judge_run_get(*, project: Project, run_id: int) -> JudgeRun:
    return JudgeRun.objects.select_related("prompt", "rater", "taxonomy_version__taxonomy", "created_by").get(
        project=project, pk=run_id
    )


def prompt_versions(*, taxonomy_version) -> QuerySet[PromptTemplate]:
    return (
        PromptTemplate.objects.filter(taxonomy_version=taxonomy_version)
        .select_related("created_by")
        .order_by("-number")
    )


@dataclass(frozen=True)
class Progress:
    state: str
    state_label: str
    total: int
    done: int
    failed: int
    cached: int
    truncated: int
    remaining: int
    percent: int
    rate_per_min: float | None
    eta_seconds: int | None
    elapsed_seconds: int | None
    tokens_in: int
    tokens_out: int
    tokens_reasoning: int
    cost: str
    error: str
    active: bool
    estimate: dict
    budget_used: int | None  # percent of the tighter budget used (None: no budget)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge_run_progress(*, run: JudgeRun) -> Progress:
    """Counters come from the run row (updated with each item's result in the same transaction)."""
    processed = run.n_done + run.n_failed
    elapsed = None
    rate = eta = None
    if run.started_at:
        end = run.finished_at or timezone.now()
        elapsed = max(0, int((end - run.started_at).total_seconds()))
        if processed and elapsed:
            rate = processed / elapsed * 60
            if run.is_active:
                eta = int(run.n_remaining / (processed / elapsed))
    return Progress(
        state=run.state,
        state_label=run.get_state_display(),
        total=run.n_total,
        done=run.n_done,
        failed=run.n_failed,
        cached=run.n_cached,
        truncated=run.n_truncated,
        remaining=run.n_remaining,
        percent=run.percent,
        rate_per_min=round(rate, 1) if rate is not None else None,
        eta_seconds=eta,
        elapsed_seconds=elapsed,
        tokens_in=run.tokens_in,
        tokens_out=run.tokens_out,
        tokens_reasoning=run.tokens_reasoning,
        cost=f"{run.cost:.4f}",
        error=run.error,
        active=run.is_active,
        estimate=run.estimate or {},
        budget_used=_budget_used(run),
    )


def _budget_used(run: JudgeRun) -> int | None:
    shares = []
    if run.budget_tokens:
        shares.append(100 * (run.tokens_in + run.tokens_out) / run.budget_tokens)
    if run.budget_cost:
        shares.append(float(100 * run.cost / run.budget_cost))
    return int(max(shares)) if shares else None


def judge_items(*, run: JudgeRun, state: str | None = None, truncated: bool | None = None) -> QuerySet[JudgeItem]:
    qs = JudgeItem.objects.filter(run=run).select_related("trace").order_by("id")
    if state:
        qs = qs.filter(state=state)
    if truncated is not None:
        qs = qs.filter(truncated=truncated)
    return qs


# --------------------------------------------------------------------------- quality


def _ratio(num: int, den: int, why: str) -> dict[str, Any]:
    if den == 0:
        return {"value": None, "undefined": why}
    return {"value": num / den, "undefined": None}


def binary_scores(pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """(human, judge) 0/1 pairs -> counts, accuracy, precision, recall, F1, kappa (undefined says why)."""
    tp = sum(1 for h, j in pairs if h and j)
    fp = sum(1 for h, j in pairs if not h and j)
    fn = sum(1 for h, j in pairs if h and not j)
    tn = sum(1 for h, j in pairs if not h and not j)
    n = len(pairs)
    precision = _ratio(tp, tp + fp, "the judge never said present")
    recall = _ratio(tp, tp + fn, "the humans never said present")
    # F1 = 2TP / (2TP + FP + FN): 0 when TP = 0 and either side said present (a judge that never
    # finds what the humans found is the worst, not undefined); undefined only when nobody said present.
    f1 = _ratio(2 * tp, 2 * tp + fp + fn, "neither the humans nor the judge said present")
    if n:
        kappa = cohen_kappa([h for h, _ in pairs], [j for _, j in pairs])
    else:
        kappa = {"value": None, "undefined": "no unit labelled by both"}
    return {
        "n": n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "accuracy": _ratio(tp + tn, n, "no unit labelled by both"),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "kappa": kappa,
    }


def _judge_vs_agreed(
    *, run: JudgeRun, user, codes: list[str], agreed: dict[tuple[int, str], int]
) -> tuple[dict[str, list[tuple[int, int]]], dict[int, list[dict[str, Any]]], int]:
    """(human, judge) pairs per mode where both decided, the disagreements by trace (with the
    judge's rationale and confidence), and how many traces were compared."""
    visible = annotations_visible_to(user=user, project=run.project).filter(
        rater=run.rater, taxonomy_version=run.taxonomy_version, round__isnull=True, trace_id__in=run.trace_ids
    )
    judge: dict[tuple[int, str], tuple[int, str, float | None]] = {}
    for tid, code, decision, rationale, conf in (
        ModeLabel.objects.filter(annotation__in=visible)
        .exclude(decision="unsure")
        .values_list("annotation__trace_id", "mode__code", "decision", "rationale", "confidence")
    ):
        judge[(tid, code)] = (int(decision == "present"), rationale, conf)
    per_mode: dict[str, list[tuple[int, int]]] = {c: [] for c in codes}
    by_trace: dict[int, list[dict[str, Any]]] = {}
    for (tid, code), human in agreed.items():
        if (tid, code) not in judge or code not in per_mode:
            continue
        j, rationale, conf = judge[(tid, code)]
        per_mode[code].append((human, j))
        if human != j:
            by_trace.setdefault(tid, []).append(
                {
                    "code": code,
                    "human": "present" if human else "absent",
                    "judge": "present" if j else "absent",
                    "rationale": rationale,
                    "confidence": conf,
                }
            )
    return per_mode, by_trace, len({t for (t, c) in agreed if (t, c) in judge})


def judge_quality(*, run: JudgeRun, user, worst: int = 25) -> dict[str, Any]:
    """The run's rater against the agreed labels on the traces of the run (see module docstring),
    and its failure attribution against the reference attributions (``attribution``: None when no
    trace of the run has one). The quality page and the API both render this one result."""
    project = run.project
    version = run.taxonomy_version
    modes = list(FailureMode.objects.filter(version=version).order_by("order", "code"))
    codes = [m.code for m in modes]
    excluded, excluded_why = scored_trace_exclusions(run)
    left_out = excluded & set(run.trace_ids)
    agreed: dict[tuple[int, str], int] = {}
    # the agreed labels of every closed round carried onto the run's version (a value the mapping
    # cannot decide is not compared)
    on_version = agreed_labels_on_version(project=project, target=version, trace_ids=run.trace_ids)
    for tid, values in on_version.labels.items():
        if tid not in excluded:
            for code, v in values.items():
                agreed[(tid, code)] = v
    via_mapping = on_version.via_mapping
    # the blind rule: no consensus of a trace the user is labelling blind again now
    agreed = reference_visible_to(user=user, project=project, reference=agreed)
    result: dict[str, Any] = {
        "run": run.pk,
        "rater": run.rater.name if run.rater else None,
        "rater_kind": run.rater.kind if run.rater else None,
        "rater_id": run.rater_id,
        "n_agreed_traces": len({t for t, _ in agreed}),
        "taxonomy_version": version.label,
        "reference_via_mapping": via_mapping,
        "reference_unknown": on_version.n_unknown,
        "modes": [],
        "overall": None,
        "disagreements": [],
        "in_sample": False,
        "attribution": None,
        "n_excluded_traces": len(left_out),
        "excluded_reason": excluded_why if left_out else "",
        "cross_fitted": cross_fit_note(run),
    }
    if run.rater is None:
        return result
    result["attribution"] = judge_attribution_quality(run=run, user=user)
    per_mode, by_trace, n_compared = _judge_vs_agreed(run=run, user=user, codes=codes, agreed=agreed)
    names = {m.code: m.name for m in modes}
    result["modes"] = [{"code": c, "name": names[c], **binary_scores(per_mode[c])} for c in codes]
    result["overall"] = binary_scores([p for c in codes for p in per_mode[c]])
    result["n_compared_traces"] = n_compared
    info = run.baseline_info or {}
    if (
        run.provider == JudgeRun.Provider.BASELINE
        and info.get("trained_on", "").startswith("agreed")
        and not info.get("scores")
        and int(info.get("n_train") or 0) > len(info.get("training_trace_ids") or [])
    ):
        # a baseline from before cross-fitting whose training traces are not all recorded: some
        # of the compared traces may be in-sample
        result["in_sample"] = True
    titles = dict(run.project.traces.filter(pk__in=list(by_trace)).values_list("pk", "title"))
    ranked = sorted(by_trace.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:worst]
    result["disagreements"] = [
        {"trace_id": tid, "title": titles.get(tid) or f"Trace #{tid}", "n": len(rows), "modes": rows}
        for tid, rows in ranked
    ]
    return result


# --------------------------------------------------------------------------- what a run reads


def trace_steps(trace_id: int) -> list[prompting.StepIn]:
    """A trace's steps as the prompt shows them."""
    rows = Step.objects.filter(trace_id=trace_id).order_by("index").values_list("index", "agent", "kind", "content")
    steps = [prompting.StepIn(*r) for r in rows]
    if not steps:  # a trace without parsed steps: its raw text as one step
        raw = Trace.objects.values_list("raw_text", flat=True).get(pk=trace_id)
        steps = [prompting.StepIn(0, "", "log", raw)]
    return steps


def trace_texts(trace_ids: Sequence[int]) -> dict[int, str]:
    """Each trace's text (its steps joined, else its raw text): what the baseline reads."""
    texts: dict[int, list[str]] = {t: [] for t in trace_ids}
    for start in range(0, len(trace_ids), 200):
        chunk = trace_ids[start : start + 200]
        for tid, content in (
            Step.objects.filter(trace_id__in=chunk).order_by("trace_id", "index").values_list("trace_id", "content")
        ):
            texts[tid].append(content)
    out = {t: "\n".join(parts) for t, parts in texts.items()}
    missing = [t for t, text in out.items() if not text]
    for tid, raw in Trace.objects.filter(pk__in=missing).values_list("id", "raw_text"):
        out[tid] = raw
    return out
