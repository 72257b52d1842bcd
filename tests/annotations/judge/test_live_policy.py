"""The live judge policy (annotations/judge/live.py, issue 30): new live traces are judged at the
chosen share within the daily budget (a run each, through the local OpenAI-protocol server), an
independent uniformly random share goes to the human round's queues, and the corrected shares use
only that random sample."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from annotations.judge.live import human_sample_ids, live_policy_set, live_policy_summary
from annotations.models import JudgeRun, LiveDraw, ProviderConnection, Round, RoundTrace
from annotations.monitoring.series import failure_series
from tests.annotations.conftest import drive
from tests.annotations.releases_factories import annotate, closed_round, decisions, other_rater
from traces.live.assembly import live_trace_assemble
from traces.live.otlp import decode
from traces.live.store import spans_store
from traces.models import LiveTrace

pytestmark = pytest.mark.django_db


def arrive(project, i: int, framework: str = "crewai"):
    """Live trace ``i`` (its own words) through the receiver's store and the assembly; its trace."""
    trace_hex = f"{i + 1:032x}"
    attrs = [{"key": "gen_ai.agent.name", "value": {"stringValue": f"agent-{i}"}},
             {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
             {"key": "output.value", "value": {"stringValue": f"run {i}: the board is drawn"}}]  # fmt: skip
    span = {"traceId": trace_hex, "spanId": f"{i + 1:016x}", "name": f"run {i}", "endTimeUnixNano": "5",
            "attributes": attrs}  # fmt: skip
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": framework}, "spans": [span]}]}]}
    spans_store(project=project, spans=decode(json.dumps(doc).encode(), "application/json").spans)
    live = live_trace_assemble(live_id=LiveTrace.objects.get(project=project, otel_trace_id=trace_hex).pk)
    assert live.state == "assembled", live.error
    return live.trace


@pytest.fixture
def policy(project, manager, mast_version, llm_server):
    connection = ProviderConnection.objects.create(project=project, name="local", base_url=llm_server.url,
                                                   models_list=["judge-model"])  # fmt: skip
    sample_round = Round.objects.create(project=project, name="Live sample", taxonomy_version=mast_version,
                                        state=Round.State.OPEN)  # fmt: skip
    return live_policy_set(project=project, by=manager, data={
        "connection": connection.pk, "model": "judge-model", "judge_share": 0.5, "human_share": 0.3,
        "human_round": sample_round.pk, "daily_tokens": None, "daily_cost": None})  # fmt: skip


def test_new_live_traces_are_judged_at_the_share_and_sampled_for_humans(project, policy):
    traces = [arrive(project, i) for i in range(60)]
    draws = {d.trace_id: d for d in LiveDraw.objects.filter(project=project)}
    assert set(draws) == {t.pk for t in traces}
    judged = [d for d in draws.values() if d.judge]
    sampled = [d for d in draws.values() if d.human]
    # uniform draws: 60 traces at 0.5 and 0.3 fall within these bounds but for once in ~10,000 runs
    assert 14 <= len(judged) <= 46 and 4 <= len(sampled) <= 34
    assert all(d.run is not None and d.run.selection["origin"] == "live" for d in judged)
    assert all(d.run is None for d in draws.values() if not d.judge)
    in_queue = set(RoundTrace.objects.filter(round=policy.human_round).values_list("trace_id", flat=True))
    assert in_queue == {d.trace_id for d in sampled}
    assert human_sample_ids(project=project) == in_queue
    # the judge's runs go through the ordinary machinery to the local OpenAI-protocol server
    run = judged[0].run
    assert drive(run).state == "done" and run.items.get().state == "done"
    from traces.live.stats import live_summary

    backlog = live_summary(project=project)["judge_backlog"]  # the ingest page's figure
    assert backlog == {"runs": len(judged) - 1, "traces": len(judged) - 1}  # one run was driven to the end
    summary = live_policy_summary(project=project)
    assert summary["traces_drawn"] == 60 and summary["judged"] == len(judged)
    assert summary["human_sample"] == len(sampled) and summary["spent_today"]["tokens"] > 0


def test_the_daily_budget_skips_the_judge_and_says_why(project, policy):
    policy.judge_share, policy.daily_tokens = 1.0, 100
    policy.save()
    first = LiveDraw.objects.get(trace=arrive(project, 0))
    assert first.run is not None and first.run.budget_tokens == 100  # what is left of today's budget
    JudgeRun.objects.filter(pk=first.run_id).update(tokens_in=90, tokens_out=15)  # the run spent it
    later = LiveDraw.objects.get(trace=arrive(project, 1))
    assert later.judge and later.run is None and later.skipped == "daily token budget used up (105 of 100)"
    assert [s["trace_id"] for s in live_policy_summary(project=project)["skipped"]] == [later.trace_id]
    policy.daily_tokens, policy.daily_cost = None, Decimal("0.0001")
    policy.save()
    JudgeRun.objects.filter(pk=first.run_id).update(cost=Decimal("0.01"))
    assert "daily cost budget used up" in LiveDraw.objects.get(trace=arrive(project, 2)).skipped


def test_corrected_shares_of_live_data_use_only_the_random_sample(project, policy, manager, mast_version):
    judge = other_rater("live-judge")
    traces = [arrive(project, i) for i in range(12)]
    for t in traces:
        annotate(t, judge, mast_version, decisions(mast_version, present={"1.3"}))
    LiveDraw.objects.filter(project=project).update(human=False)
    LiveDraw.objects.filter(trace__in=traces[:4]).update(human=True)
    # agreed labels on the 4 sampled traces (no 1.3) and on 4 hand-picked ones (1.3 present)
    closed_round(project, mast_version, {t: set() for t in traces[:4]} | {t: {"1.3"} for t in traces[4:8]})
    series = failure_series(user=manager, project=project, source=f"corrected:{judge.pk}")
    week = {m["code"]: m for m in series.periods[-1]["modes"]}["1.3"]
    assert week["n_human"] == 4  # the hand-picked four are not the human sample
    assert week["value"] == pytest.approx(0.0)  # the judge says 1.3 everywhere; the sample says never


def test_the_page_sets_the_policy_and_refuses_what_it_cannot_use(client, project, manager, annotator, llm_server):
    from django.urls import reverse

    connection = ProviderConnection.objects.create(project=project, name="local", base_url=llm_server.url,
                                                   models_list=["judge-model"])  # fmt: skip
    url = reverse("annotations:judge_live", args=[project.slug])
    client.force_login(annotator)
    assert client.get(url).status_code in (403, 404)
    client.force_login(manager)
    assert "No policy yet" in client.get(url).content.decode()
    bad = client.post(url, {"connection": connection.pk, "model": "m", "judge_share": "150", "human_share": "10"},
                      follow=True)  # fmt: skip
    assert "a share between 0 and 1" in bad.content.decode()
    client.post(url, {"active": "on", "connection": connection.pk, "model": "judge-model", "judge_share": "25",
                      "human_share": "10", "daily_tokens": "50000"})  # fmt: skip
    policy = project.live_policy
    assert (policy.judge_share, policy.human_share, policy.daily_tokens) == (0.25, 0.1, 50000)
    assert "0 live traces drawn" in client.get(url).content.decode()
