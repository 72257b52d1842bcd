"""The live judge policy: what happens to each new live trace (issue 30).

For each trace a live trace becomes (``traces.live.hooks``), two independent uniform draws:

* judged, with probability ``judge_share``: a judge run of that trace on the policy's connection
  and model (the ordinary runs: prompt, cache, retries, the run pages), unless today's live runs
  have used the daily token or cost budget: then it is recorded as skipped, with why;
* in the human sample, with probability ``human_share``: added to the policy's open round, so it is
  in its annotators' queues. Because this draw ignores everything about the trace, the sample is a
  uniformly random sample of the live traces, which is what prediction-powered inference needs:
  once a project has live draws, the corrected shares (experiments, monitoring) use the agreed
  labels of the sampled traces only (``human_sample_ids``), never hand-picked ones.

Draws use the operating system's randomness; each is stored (``LiveDraw``), so the policy's work,
its spend and what it skipped are on the live page and in the API.
"""

from __future__ import annotations

import random
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db.models import Max, Sum
from django.utils import timezone

from annotations.judge.runs import judge_run_create
from annotations.models import JudgeRun, LiveDraw, LivePolicy, ProviderConnection, Round, RoundTrace
from traces.models import Project

_rng = random.SystemRandom()
LIVE = "live"  # JudgeRun.selection["origin"] of the policy's runs


def live_spend_today(*, project: Project) -> dict:
    """Tokens and cost of today's live runs (the budget's day is the site's time zone's)."""
    start = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    runs = JudgeRun.objects.filter(project=project, created_at__gte=start, selection__origin=LIVE)
    spent = runs.aggregate(tin=Sum("tokens_in"), tout=Sum("tokens_out"), cost=Sum("cost"), n=Sum("n_done"))
    return {"tokens": (spent["tin"] or 0) + (spent["tout"] or 0), "cost": spent["cost"] or Decimal(0),
            "runs": runs.count()}  # fmt: skip


def _over_budget(policy: LivePolicy, spent: dict) -> str:
    if policy.daily_tokens is not None and spent["tokens"] >= policy.daily_tokens:
        return f"daily token budget used up ({spent['tokens']:,} of {policy.daily_tokens:,})"
    if policy.daily_cost is not None and spent["cost"] >= policy.daily_cost:
        return f"daily cost budget used up ({spent['cost']:.4f} of {policy.daily_cost})"
    return ""


def live_policy_apply(*, live, trace) -> LiveDraw | None:
    """The policy's draws for one new trace (module docstring); None without an active policy."""
    policy = LivePolicy.objects.select_related("project", "connection", "human_round").filter(
        project_id=trace.project_id, active=True).first()  # fmt: skip
    if policy is None:
        return None
    draw = LiveDraw(project_id=trace.project_id, trace=trace, judge=_rng.random() < policy.judge_share,
                    human=_rng.random() < policy.human_share)  # fmt: skip
    if draw.human and policy.human_round and policy.human_round.state == Round.State.OPEN:
        last = RoundTrace.objects.filter(round=policy.human_round).aggregate(m=Max("order"))["m"]
        RoundTrace.objects.get_or_create(round=policy.human_round, trace=trace, defaults={"order": (last or 0) + 1})
    if draw.judge:
        spent = live_spend_today(project=policy.project)
        draw.skipped = _over_budget(policy, spent)
        if not draw.skipped:
            run = judge_run_create(
                project=policy.project, by=policy.created_by, provider="openai", connection=policy.connection,
                model=policy.model, traces={"ids": [trace.pk]},
                budget_tokens=(policy.daily_tokens - spent["tokens"]) if policy.daily_tokens is not None else None,
                budget_cost=(policy.daily_cost - spent["cost"]) if policy.daily_cost is not None else None,
            )  # fmt: skip
            JudgeRun.objects.filter(pk=run.pk).update(selection={**run.selection, "origin": LIVE})
            draw.run = run
    draw.save()
    return draw


def live_policy_set(*, project: Project, by, data: dict) -> LivePolicy:
    """Create or change the project's policy; raises ValidationError saying which field is wrong."""
    connection = ProviderConnection.objects.filter(project=project, pk=int(data.get("connection") or 0)).first()
    if connection is None:
        raise ValidationError({"connection": "choose one of the project's judge connections"})
    if not str(data.get("model") or "").strip():
        raise ValidationError({"model": "name the model the judge calls"})
    for name in ("judge_share", "human_share"):
        value = data.get(name)
        if value is None or not 0 <= float(value) <= 1:
            raise ValidationError({name: "a share between 0 and 1"})
    human_round = None
    if data.get("human_round"):
        human_round = Round.objects.filter(project=project, pk=data["human_round"]).first()
        if human_round is None:
            raise ValidationError({"human_round": "not a round of this project"})
    policy, _ = LivePolicy.objects.update_or_create(project=project, defaults={
        "active": bool(data.get("active", True)), "connection": connection, "model": str(data["model"]).strip(),
        "judge_share": float(data["judge_share"]), "human_share": float(data["human_share"]),
        "human_round": human_round, "daily_tokens": data.get("daily_tokens") or None,
        "daily_cost": data.get("daily_cost") or None, "created_by": by,
    })  # fmt: skip
    return policy


def live_policy_summary(*, project: Project) -> dict | None:
    policy = LivePolicy.objects.filter(project=project).select_related("connection", "human_round").first()
    if policy is None:
        return None
    draws = LiveDraw.objects.filter(project=project)
    return {
        "set": True, "active": policy.active, "connection": policy.connection_id, "model": policy.model,
        "judge_share": policy.judge_share, "human_share": policy.human_share,
        "human_round": policy.human_round_id, "daily_tokens": policy.daily_tokens,
        "daily_cost": str(policy.daily_cost) if policy.daily_cost is not None else None,
        "spent_today": {k: str(v) if isinstance(v, Decimal) else v
                        for k, v in live_spend_today(project=project).items()},
        "traces_drawn": draws.count(), "judged": draws.filter(judge=True, run__isnull=False).count(),
        "skipped": list(draws.exclude(skipped="").values("trace_id", "skipped", "drawn_at")[:50]),
        "human_sample": draws.filter(human=True).count(),
    }  # fmt: skip


def human_sample_ids(*, project: Project) -> set[int] | None:
    """The traces of the live human sample; None when the project has no live draws (then every
    agreed label is the human sample, as for files)."""
    draws = LiveDraw.objects.filter(project=project)
    if not draws.exists():
        return None
    return set(draws.filter(human=True).values_list("trace_id", flat=True))


def live_judge_backlog(*, project: Project) -> dict:
    """The live policy's runs not finished yet (queued, running or paused) and their traces: the
    ingest page's "judge backlog"."""
    unfinished = ["queued", "running", "paused"]
    waiting = JudgeRun.objects.filter(project=project, selection__origin=LIVE, state__in=unfinished)
    return {"judge_backlog": {"runs": waiting.count(), "traces": waiting.aggregate(n=Sum("n_total"))["n"] or 0}}
