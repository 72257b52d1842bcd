"""Demo step of monitoring and alerts: the demo's traces dated over the last eight weeks, a
before/after pair of cohorts, an alert rule that fires on the judge's labels, and a webhook.

The demo imports all its traces at once; so the chart over time has periods, their import dates
are spread evenly over the last eight weeks, oldest trace first (the demo says so). The labels are
the demo's own (agreed labels of its closed rounds, its judge runs). The rule watches category 3 on
the latest scripted-LLM run's labels over two weeks; its level is set under that window's share
so the demo shows an alert (the demo says this too). The webhook points at the demo's stand-in
(``judge/demo_llm.py`` takes POSTs under /hooks/), so the log shows a delivered try once the demo's
worker sends it. Idempotent: an existing rule keeps everything as it is.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

from annotations.models import AlertRule, JudgeRun
from annotations.monitoring.alerts import rule_evaluate
from annotations.monitoring.series import rows_between, shares, source_labels
from annotations.monitoring.services import webhook_create
from traces.models import Trace

RULE = "Verification failures (category 3) up"
WEEKS = 8


def _spread_dates(project) -> datetime:
    """Dates the project's traces over the last WEEKS weeks; returns the midpoint (before/after)."""
    now = timezone.now()
    ids = list(Trace.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    span = timedelta(weeks=WEEKS)
    for i, pk in enumerate(ids):
        when = now - span + span * (i + 0.5) / max(len(ids), 1)
        Trace.objects.filter(pk=pk).update(imported_at=when)
    return now - span / 2


def seed(ctx) -> None:
    project = ctx.project
    if AlertRule.objects.filter(project=project, name=RULE).exists():
        ctx.say(f"Monitoring: rule “{RULE}” already there; see /p/{project.slug}/analytics/monitoring/")
        return
    run = JudgeRun.objects.filter(project=project, state="done", provider="openai").order_by("-pk").first()
    if run is None or run.rater_id is None:
        ctx.say("Monitoring: no judge run to watch; rule not seeded")
        return
    middle = timezone.localdate(_spread_dates(project)).isoformat()
    source = str(run.rater_id)
    labels = source_labels(user=ctx.users["manager"], project=project, source=source)
    now = timezone.now()
    _, cats = shares(labels, rows_between(labels, project, "", now - timedelta(days=14), now))
    share = next(c for c in cats if c["code"] == "3")["value"] or 0.0
    level = max(0.0, math.floor(10 * share - 1e-9) / 10)  # the tenth under the window's share
    rule = AlertRule.objects.create(
        project=project, name=RULE, kind="level", target="3", level=level, window_days=14, min_traces=3,
        source=source, created_by=ctx.users["manager"],
    )  # fmt: skip
    if ctx.llm_url:
        webhook_create(project=project, by=ctx.users["manager"], url=ctx.llm_url.removesuffix("/v1") + "/hooks/demo")
    fired = rule_evaluate(rule_id=rule.pk)
    slug = project.slug
    ctx.say(
        f"Monitoring: the demo's traces are dated over the last {WEEKS} weeks (their import dates spread for the "
        f"chart); /p/{slug}/analytics/monitoring/?rater={source} shows category 3 per week with the alert; "
        f"rule “{RULE}” (level {100 * level:.0f}%, set under the last two weeks' {100 * share:.0f}% so it fires) "
        f"{'fired' if fired else 'did not fire'}; alerts and the webhook's tries at /p/{slug}/analytics/alerts/"
    )
    ctx.say(
        f"Experiments: before/after at /p/{slug}/analytics/experiment/?a=imported:..{middle}&b=imported:{middle}.. "
        f"and two frameworks at /p/{slug}/analytics/experiment/?a=mas_name:AG2&b=mas_name:ChatDev"
    )
