"""Demo step of the live judge policy: the demo's traces that arrive live (an exporter pointed at
the running demo with its ingest key) are all judged by the stand-in "LLM" and half of them drawn
for the human sample (no round: drawn and counted, not queued)."""

from __future__ import annotations

from annotations.judge.demo import CONNECTION, MODEL
from annotations.judge.live import live_policy_set
from annotations.models import LivePolicy, ProviderConnection


def seed(ctx) -> None:
    project = ctx.project
    if LivePolicy.objects.filter(project=project).exists():
        ctx.say(f"Live judge policy: already set; /p/{project.slug}/judge/live/")
        return
    connection = ProviderConnection.objects.filter(project=project, name=CONNECTION).first()
    if connection is None:
        ctx.say("Live judge policy: no demo connection, not set")
        return
    live_policy_set(project=project, by=ctx.users["manager"], data={
        "connection": connection.pk, "model": MODEL, "judge_share": 1.0, "human_share": 0.5})  # fmt: skip
    ctx.say(f"Live judge policy: every live trace judged by “{CONNECTION}”, half drawn for the human sample; "
            f"/p/{project.slug}/judge/live/")  # fmt: skip
