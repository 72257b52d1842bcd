"""Judge runs against a server that behaves like a reasoning model, through a project connection.

The server (tests/llm_server.py, ``reasoning=True``) refuses ``max_tokens`` and any temperature
but 1 with the 400 OpenAI's o1/o3/gpt-5 send, reports reasoning tokens, answers agentdash's
``@@`` format to agentdash's prompt and JSON to ours, and (``require_key``) refuses other keys.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from annotations.judge.connections import connection_save
from annotations.judge.runs import judge_run_create
from annotations.models import Annotation, JudgeItem, ModeLabel, ProviderConnection
from tests.annotations.conftest import drive, make_judge_traces
from tests.llm_server import LLMServer, Reply, mast_answer

pytestmark = pytest.mark.django_db

KEY = "sk-proj-TESTKEY-9f8e7d6c5b4a3210"


@pytest.fixture
def reasoner():
    server = LLMServer(reasoning=True, require_key=KEY).start()
    yield server
    server.stop()


def connect(project, manager, server, **kw):
    kw.setdefault("price_in", "2.50")
    kw.setdefault("price_out", "10")
    return connection_save(
        project=project,
        by=manager,
        name="Lab reasoner",
        base_url=server.url,
        models=["lab-reasoner"],
        api_key=KEY,
        **kw,
    )


def run_on(project, manager, conn, provider="openai", model="lab-reasoner", **kw):
    kw.setdefault("concurrency", 2)
    kw.setdefault("timeout", 5)
    return judge_run_create(
        project=project, by=manager, provider=provider, connection=conn, model=model, start=False, **kw
    )


@pytest.mark.parametrize("provider", ["openai", "mast"])
def test_a_reasoning_model_serves_a_full_run_with_each_preset(project, manager, reasoner, fast_retries, provider):
    make_judge_traces(project, 4)
    conn = connect(project, manager, reasoner)
    run = drive(run_on(project, manager, conn, provider=provider))
    assert run.state == "done" and run.n_done == 4 and run.n_failed == 0, run.error
    # The first call was refused for max_tokens, then for temperature; both are left out for the run.
    assert sorted(run.dropped_params) == ["max_tokens", "temperature"]
    later = reasoner.requests[-1]
    assert "max_tokens" not in later and "temperature" not in later and later["max_completion_tokens"] > 0
    assert reasoner.n_requests == 4 + 2  # one per trace plus the two refused ones
    anns = Annotation.objects.filter(rater=run.rater)
    assert anns.count() == 4
    present = set(
        ModeLabel.objects.filter(annotation__in=anns, decision="present").values_list("mode__code", flat=True)
    )
    assert present == ({"1.3"} if provider == "mast" else {"1.1"})
    assert ModeLabel.objects.filter(annotation__in=anns).count() == 4 * 14
    assert (run.tokens_in, run.tokens_out, run.tokens_reasoning) == (4000, 800, 600)
    assert run.cost == Decimal("4000") * Decimal("2.5") / 10**6 + Decimal("800") * 10 / Decimal(10**6)
    assert run.estimate["traces"] == 4 and Decimal(run.estimate["cost"]) > 0


def test_a_known_reasoning_model_name_gets_the_right_parameters_first_time(project, manager, reasoner, fast_retries):
    make_judge_traces(project, 2)
    run = drive(run_on(project, manager, connect(project, manager, reasoner), model="o3-mini"))
    assert run.state == "done" and run.dropped_params == []
    assert reasoner.n_requests == 2


def test_mast_modes_the_answer_does_not_state_are_unknown_not_absent(project, manager, reasoner, fast_retries):
    make_judge_traces(project, 1)
    reasoner.push(Reply(mast_answer(present=["2.3"], omit=["2.2", "3.1"])))
    run = drive(run_on(project, manager, connect(project, manager, reasoner), provider="mast", model="o1"))
    assert run.state == "done"
    labels = dict(ModeLabel.objects.filter(annotation__rater=run.rater).values_list("mode__code", "decision"))
    assert len(labels) == 12 and "2.2" not in labels and "3.1" not in labels
    assert labels["2.3"] == "present" and labels["1.1"] == "absent"
    item = JudgeItem.objects.get(run=run)
    assert any("2.2" in w and "unknown" in w for w in item.parsed["warnings"])


def test_mast_prompt_is_agentdash_s_own(project, manager, reasoner, fast_retries):
    from agentdash.annotator import annotator

    make_judge_traces(project, 1)
    drive(run_on(project, manager, connect(project, manager, reasoner), provider="mast", model="o1"))
    sent = reasoner.requests[-1]["messages"]
    assert len(sent) == 1 and sent[0]["role"] == "user"
    inst = annotator.__new__(annotator)
    inst.definitions, inst.examples = inst._load_definitions(), inst._load_examples()
    trace_part = sent[0]["content"].split("Here is the trace: \n", 1)[1].split("Also, here are the explanations", 1)[0]
    assert sent[0]["content"] == inst._create_evaluation_prompt(trace_part)
    assert "[step 0] Coder:" in trace_part


def test_a_wrong_key_stops_the_run_with_the_server_s_words_and_no_item_stays_running(
    project, manager, reasoner, fast_retries
):
    make_judge_traces(project, 5)
    conn = connect(project, manager, reasoner)
    conn = connection_save(
        project=project,
        by=manager,
        name=conn.name,
        base_url=conn.base_url,
        api_key="sk-wrong-key-000000",
        connection=conn,
    )
    run = drive(run_on(project, manager, conn, concurrency=3))
    assert run.state == "failed" and "Incorrect API key provided" in run.error
    assert not JudgeItem.objects.filter(run=run, state="running").exists()


def test_a_missing_key_variable_leaves_no_item_running(project, manager, llm_server, fast_retries, monkeypatch):
    fast_retries.MAST_JUDGE_API_KEYS = f"JUDGE_TEST_KEY={llm_server.url}"
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    make_judge_traces(project, 6)
    conn = connection_save(project=project, by=manager, name="env", base_url=llm_server.url, key_env="JUDGE_TEST_KEY")
    run = drive(run_on(project, manager, conn, model="m", concurrency=4))
    assert run.state == "failed" and "JUDGE_TEST_KEY" in run.error
    assert JudgeItem.objects.filter(run=run, state="running").count() == 0
    assert llm_server.n_requests == 0


def test_the_key_is_stored_encrypted(project, manager, reasoner):
    conn = connect(project, manager, reasoner)
    raw = json.dumps(list(ProviderConnection.objects.filter(pk=conn.pk).values()), default=str)
    assert KEY not in raw and conn.key_hint == KEY[-4:]


def test_moving_a_connection_forgets_its_stored_key(project, manager, reasoner):
    conn = connect(project, manager, reasoner)
    moved = connection_save(
        project=project, by=manager, name=conn.name, base_url="http://127.0.0.1:9/v1", connection=conn
    )
    assert moved.key_encrypted == "" and moved.key_source == "none"


def test_the_key_never_appears_in_responses_logs_or_exports(
    client, project, manager, reasoner, fast_retries, caplog, tmp_path
):
    caplog.set_level(logging.DEBUG)
    make_judge_traces(project, 2)
    client.force_login(manager)
    created = client.post(
        f"/api/projects/{project.slug}/judge-connections/",
        {"name": "via api", "base_url": reasoner.url, "models": ["lab-reasoner"], "api_key": KEY},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    conn = ProviderConnection.objects.get(pk=created.json()["id"])
    run = drive(run_on(project, manager, conn))
    assert run.state == "done"
    bodies = [created.content]
    for url in (
        f"/api/projects/{project.slug}/judge-connections/",
        f"/api/projects/{project.slug}/judge-connections/{conn.pk}/",
        f"/api/projects/{project.slug}/judge-runs/",
        f"/api/projects/{project.slug}/judge-runs/{run.pk}/",
        f"/api/projects/{project.slug}/judge-runs/{run.pk}/items/",
        reverse("annotations:judge_connections", args=[project.slug]),
        reverse("annotations:judge_connection", args=[project.slug, conn.pk]),
        reverse("annotations:judge_run", args=[project.slug, run.pk]),
        reverse("annotations:judge_run_new", args=[project.slug]),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        bodies.append(response.content)
    probe = f"/api/projects/{project.slug}/judge-connections/{conn.pk}/test/"
    bodies.append(client.post(probe, {}, content_type="application/json").content)
    out = tmp_path / "export.jsonl"
    call_command("export_dataset", "--project", project.slug, "--format", "jsonl", "--out", str(out))
    bodies.append(out.read_bytes())
    for body in bodies:
        assert KEY.encode() not in body and KEY[:-4].encode() not in body
    assert KEY not in caplog.text


def test_connection_test_shows_the_server_s_error_text(client, project, manager, reasoner):
    conn = connect(project, manager, reasoner)
    conn = connection_save(
        project=project,
        by=manager,
        name=conn.name,
        base_url=conn.base_url,
        api_key="sk-wrong-key-000000",
        models=["o1"],
        connection=conn,
    )
    client.force_login(manager)
    html = client.post(
        reverse("annotations:judge_connection", args=[project.slug, conn.pk]), {"action": "test", "model": "o1"}
    ).content.decode()
    assert "It failed" in html and "Incorrect API key provided." in html
    probe = f"/api/projects/{project.slug}/judge-connections/{conn.pk}/test/"
    api = client.post(probe, {"model": "o1"}, content_type="application/json").json()
    assert api["ok"] is False and "HTTP 401" in api["message"] and "Incorrect API key provided." in api["message"]


def test_connection_test_shows_the_answer(client, project, manager, reasoner):
    conn = connect(project, manager, reasoner)
    reasoner.push(Reply("OK"))
    client.force_login(manager)
    api = client.post(
        f"/api/projects/{project.slug}/judge-connections/{conn.pk}/test/", {}, content_type="application/json"
    ).json()
    assert api["ok"] is True and api["message"] == "OK" and api["dropped"] == ["max_tokens", "temperature"]


def test_connections_page_creates_one_and_never_shows_the_key(client, project, manager, reasoner):
    client.force_login(manager)
    url = reverse("annotations:judge_connections", args=[project.slug])
    response = client.post(
        url,
        {
            "name": "Ollama",
            "preset": "ollama",
            "base_url": reasoner.url,
            "models": "llama3.1, qwen2",
            "api_key": KEY,
            "price_in": "0",
            "price_out": "0",
        },
        follow=True,
    )
    html = response.content.decode()
    assert "Connection “Ollama” saved" in html and KEY not in html and KEY[-4:] in html
    conn = ProviderConnection.objects.get(name="Ollama")
    assert conn.models_list == ["llama3.1", "qwen2"] and conn.key_encrypted


def test_a_run_picks_another_published_version(project, manager, llm_server, fast_retries):
    from taxonomy.models import TaxonomyVersion

    other = TaxonomyVersion.objects.exclude(pk=project.taxonomy_version_id).filter(status="published").first()
    if other is None:
        from taxonomy.services import version_draft_from, version_publish

        other = version_publish(version=version_draft_from(source=project.taxonomy_version, by=manager), by=manager)
    make_judge_traces(project, 1)
    run = judge_run_create(
        project=project,
        by=manager,
        provider="openai",
        base_url=llm_server.url,
        model="m",
        taxonomy_version=other,
        start=False,
    )
    run = drive(run)
    assert run.state == "done" and run.taxonomy_version_id == other.pk
    assert Annotation.objects.get(rater=run.rater).taxonomy_version_id == other.pk


def test_a_draft_version_is_refused(project, manager, llm_server):
    from taxonomy.services import version_draft_from

    draft = version_draft_from(source=project.taxonomy_version, by=manager)
    make_judge_traces(project, 1)
    with pytest.raises(ValidationError) as exc:
        judge_run_create(
            project=project,
            by=manager,
            provider="openai",
            base_url=llm_server.url,
            model="m",
            taxonomy_version=draft,
            start=False,
        )
    assert "taxonomy_version" in exc.value.message_dict
