"""Behaviour search against the local OpenAI-protocol server: quoted hits within the budget, the
refusal to start beyond it, the stop at it, made-up quotes marked, unusable answers kept as errors,
a reasoning model's refusals adapted to, the groups, and a real Celery worker running one."""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotations.corpus.behaviour import behaviour_estimate, behaviour_search_run, behaviour_search_start
from annotations.corpus.behaviour_prompt import cluster_quotes, finding_parse
from annotations.models import BehaviourHit, BehaviourSearch, ProviderConnection
from tests.annotations.releases_factories import make_trace
from tests.llm_server import LLMServer, Reply
from traces.models import Step
from traces.search.indexing import steps_index_pending

pytestmark = pytest.mark.django_db

STEP = re.compile(r"\[step (\d+)\] [^\n]*:\n(.*?)(?=\n\[step \d+\]|\Z)", re.S)
SAYS = ["the verifier approved it without running the tests", "approved, the tests were never executed",
        "it approved the patch, no test run at all", "I will run the tests now"]  # fmt: skip


def finder(body: dict) -> Reply:
    """A judge that finds "approved" steps and quotes them (usage: 900 in, 120 out)."""
    text = body["messages"][-1]["content"]
    steps = {int(n): content for n, content in STEP.findall(text)}
    quotes = [{"step": n, "quote": c.strip()[:60]} for n, c in steps.items() if "approved" in c]
    if "MADE-UP" in text:
        quotes = [{"step": 0, "quote": "the tests all passed, said nobody"}]
    if "GARBLED" in text:
        return Reply("I think so, maybe", prompt_tokens=900, completion_tokens=120)
    answer = {"present": bool(quotes), "score": 0.9 if quotes else 0.1, "quotes": quotes,
              "explanation": "it says it approved" if quotes else "no approval"}  # fmt: skip
    return Reply(json.dumps(answer), prompt_tokens=900, completion_tokens=120)


def with_steps(project, texts):
    t = make_trace(project, raw_text="\n".join(texts), n_chars=sum(len(x) for x in texts))
    for i, text in enumerate(texts):
        Step.objects.create(trace=t, index=i, agent="Verifier", content=text, line_start=i + 1, line_end=i + 1)
    return t


@pytest.fixture
def traces(project):
    out = [with_steps(project, ["plan the work", say]) for say in SAYS]
    out.append(with_steps(project, ["MADE-UP evidence here", "nothing"]))
    out.append(with_steps(project, ["GARBLED answer follows", "x"]))
    steps_index_pending()
    return out


@pytest.fixture
def server():
    s = LLMServer(default=finder).start()
    yield s
    s.stop()


@pytest.fixture
def conn(project, server):
    return ProviderConnection.objects.create(project=project, name="local", base_url=server.url,
                                             models_list=["judge-model"], price_in=Decimal("2"),
                                             price_out=Decimal("8"))  # fmt: skip


def start(project, manager, conn, traces, **kw):
    kw.setdefault("max_tokens", 100_000)
    return behaviour_search_start(project=project, by=manager, description="The verifier approves untested work",
                                  trace_ids=[t.pk for t in traces], query={"q": "approved"}, connection=conn,
                                  model="judge-model", **kw)  # fmt: skip


def test_behaviour_search_returns_quoted_hits_within_its_budget(project, manager, conn, traces, server):
    search = start(project, manager, conn, traces)
    assert behaviour_search_run(search_id=search.pk) == "done"
    search.refresh_from_db()
    assert search.n_done == len(traces) and search.tokens_in == 900 * len(traces)
    assert search.tokens_in + search.tokens_out <= search.max_tokens
    assert search.cost == (Decimal(900 * 6) * 2 + Decimal(120 * 6) * 8) / 1_000_000
    hits = {h.trace_id: h for h in BehaviourHit.objects.filter(search=search)}
    for t, say in zip(traces[:4], SAYS, strict=True):
        assert hits[t.pk].present == ("approved" in say)
    found = hits[traces[0].pk]
    assert found.quotes == [{"step": 1, "quote": SAYS[0], "found": True}]
    made_up = hits[traces[4].pk]
    assert made_up.quotes[0]["found"] is False and made_up.score == pytest.approx(0.45)  # halved: nothing verified
    assert "unusable answer" in hits[traces[5].pk].error and not hits[traces[5].pk].present
    # ranked: verified quotes first
    ranked = list(BehaviourHit.objects.filter(search=search, present=True).values_list("trace_id", flat=True))
    assert ranked[-1] == traces[4].pk
    assert search.groups.exists()
    # every request named the behaviour and the model, and asked for JSON
    assert all("The verifier approves untested work" in r["messages"][0]["content"] for r in server.requests)
    assert all(r["model"] == "judge-model" for r in server.requests)


def test_refuses_to_start_beyond_its_budget(project, manager, conn, traces):
    est = behaviour_estimate(project=project, trace_ids=[t.pk for t in traces], connection=conn)
    with pytest.raises(ValidationError, match="over the budget"):
        start(project, manager, conn, traces, max_tokens=est.tokens - 1)
    with pytest.raises(ValidationError, match="over the budget"):
        start(project, manager, conn, traces, max_cost=est.cost / 2)
    assert not BehaviourSearch.objects.exists()


def test_stops_before_a_trace_that_would_pass_the_budget(project, manager, conn, traces, server):
    est = behaviour_estimate(project=project, trace_ids=[t.pk for t in traces], connection=conn)
    search = start(project, manager, conn, traces, max_tokens=est.tokens)
    # the server's real counts are larger than the estimate: the budget runs out early
    server.default = lambda body: Reply(json.dumps({"present": False, "score": 0.0, "quotes": []}),
                                        prompt_tokens=est.tokens // 3, completion_tokens=10)  # fmt: skip
    assert behaviour_search_run(search_id=search.pk) == "stopped"
    search.refresh_from_db()
    assert 0 < search.n_done < len(traces)
    assert search.tokens_in + search.tokens_out <= search.max_tokens
    assert "would pass the budget" in search.error


def test_a_reasoning_model_is_adapted_to(project, manager, traces):
    server = LLMServer(default=finder, reasoning=True).start()
    try:
        # a reasoning model under a name the client cannot recognise: it learns from the server's 400s
        conn = ProviderConnection.objects.create(project=project, name="r", base_url=server.url)
        search = behaviour_search_start(project=project, by=manager, description="approves untested work",
                                        trace_ids=[traces[0].pk], query={}, connection=conn, model="my-reasoner",
                                        max_tokens=50_000)  # fmt: skip
        assert behaviour_search_run(search_id=search.pk) == "done"
        hit = BehaviourHit.objects.get(search=search)
        assert hit.present and hit.quotes[0]["found"], hit.error
        conn.refresh_from_db()
        assert {"max_tokens", "temperature"} <= set(conn.adaptations["my-reasoner"])
        assert "max_tokens" not in server.requests[-1] and server.refusals
    finally:
        server.stop()


def test_annotators_cannot_start_one(project, annotator, conn, traces):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        start(project, annotator, conn, traces)


def test_quotes_are_checked_against_their_step():
    f = finding_parse('```json\n{"present": true, "score": 0.8, "quotes": [{"step": 2, "quote": "APPROVED   it"},'
                      '{"step": 3, "quote": "approved it"}]}\n```', steps={2: "I approved it.", 3: "no"})  # fmt: skip
    assert [q.found for q in f.quotes] == [True, False]
    for bad in ('{"present": "yes"}', '{"present": true, "score": 3}', "no json", '{"present": true, "quotes": 5}'):
        with pytest.raises(ValueError):
            finding_parse(bad, steps={})


def test_quotes_cluster_by_what_they_say():
    texts = ["approved without running tests", "approved, tests never run", "approved untested code",
             "lost the file path", "the file path was lost", "path of the file lost again"]  # fmt: skip
    c = cluster_quotes(texts)
    assert len(set(c.labels)) == 2
    assert c.labels[0] == c.labels[1] == c.labels[2] != c.labels[3] == c.labels[4] == c.labels[5]
    assert cluster_quotes(["one quote"]).labels == [0]


def test_hits_become_an_open_code(project, manager, conn, traces, client):
    search = start(project, manager, conn, traces)
    behaviour_search_run(search_id=search.pk)
    client.force_login(manager)
    url = reverse("annotations:behaviour_search", args=[project.slug, search.pk])
    page = client.get(url)
    assert page.status_code == 200 and "this quote is not in the step" in page.content.decode()
    resp = client.post(url, {"op": "action", "do": "code", "name": "approves untested"}, follow=True)
    assert "Done: open code on the hits, 4 trace(s)" in resp.content.decode()
    group = search.groups.first()
    client.post(url, {"op": "rename", "number": group.number, "name": "Approves without tests"})
    group.refresh_from_db()
    assert group.name == "Approves without tests"


def test_api_estimate_then_start(project, manager, conn, traces, client, django_capture_on_commit_callbacks):
    client.force_login(manager)
    url = reverse("api-behaviour-searches", args=[project.slug])
    body = {"q": "approved", "connection": conn.pk, "model": "judge-model", "description": "approves untested work"}
    est = client.post(url, {**body, "estimate_only": True}, content_type="application/json")
    assert est.status_code == 200 and est.json()["n_traces"] == 3
    over = client.post(url, {**body, "max_tokens": est.json()["tokens"] - 1}, content_type="application/json")
    assert over.status_code == 400 and "over the budget" in json.dumps(over.json())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        made = client.post(url, {**body, "max_tokens": est.json()["tokens"]}, content_type="application/json")
    assert made.status_code == 201 and len(callbacks) == 1
    assert (
        client.get(reverse("api-behaviour-search", args=[project.slug, made.json()["id"]])).json()["state"] == "queued"
    )


@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_runs_it(project, manager, traces, celery_worker_process, client):
    server = LLMServer(default=finder).start()
    try:
        conn = ProviderConnection.objects.create(project=project, name="local", base_url=server.url)
        client.force_login(manager)
        made = client.post(reverse("api-behaviour-searches", args=[project.slug]),
                           {"q": "approved", "connection": conn.pk, "model": "m", "max_tokens": 200_000,
                            "description": "approves untested work"}, content_type="application/json")  # fmt: skip
        assert made.status_code == 201, made.content
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            search = BehaviourSearch.objects.get(pk=made.json()["id"])
            if search.state == "done":
                break
            time.sleep(0.3)
        assert search.state == "done" and search.n_done == 3
        assert BehaviourHit.objects.filter(search=search, present=True).count() == 3
    finally:
        server.stop()
