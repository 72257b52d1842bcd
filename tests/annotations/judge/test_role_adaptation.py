"""Servers that refuse the ``system`` role (and ``max_tokens``, a temperature): the request adapts.

The server is the real local one (tests/llm_server.py) answering as OpenAI's o1-mini does (also on
Azure), or as vLLM serving Gemma does, with the error texts those servers send. The run asks
again in the accepted form (``developer``, then the instructions folded into the first user
message), records that on the run and on its connection, and the model's next run on the
connection sends no request the server refuses.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.judge.connections import connection_save, connection_test
from annotations.judge.providers import base, openai_chat
from annotations.judge.runs import judge_run_create
from annotations.models import ProviderConnection
from tests.annotations.conftest import drive, make_judge_traces
from tests.llm_server import LLMServer, Reply, Status

pytestmark = pytest.mark.django_db

MODEL = "lab-reasoner"  # not a name the client knows as a reasoning model: it learns from the 400s


@pytest.fixture
def o1_mini():
    """Refuses system and developer messages, max_tokens and temperatures but 1, like o1-mini."""
    server = LLMServer(reasoning=True, refuse_roles=("system", "developer")).start()
    yield server
    server.stop()


def connect(project, manager, server):
    return connection_save(project=project, by=manager, name="Lab", base_url=server.url, models=[MODEL])


def run_over(project, manager, conn, traces):
    run = judge_run_create(
        project=project,
        by=manager,
        provider="openai",
        connection=conn,
        model=MODEL,
        traces={"ids": [t.pk for t in traces]},
        concurrency=2,
        timeout=5,
        start=False,
    )
    return run


@pytest.mark.parametrize(
    ("refuse", "style", "learned"),
    [
        (("system", "developer"), "openai", ["system_role", "developer_role", "max_tokens", "temperature"]),
        (("system",), "openai", ["system_role", "max_tokens", "temperature"]),
        (("system", "developer"), "vllm", ["system_role", "developer_role", "max_tokens", "temperature"]),
    ],
    ids=["o1-mini", "o1", "vllm-gemma"],
)
def test_a_model_refusing_system_max_tokens_and_temperature_gets_a_completed_run_and_a_recorded_form(
    project, manager, fast_retries, refuse, style, learned
):
    server = LLMServer(reasoning=True, refuse_roles=refuse, role_style=style).start()
    try:
        conn = connect(project, manager, server)
        first = drive(run_over(project, manager, conn, make_judge_traces(project, 4)))
        assert first.state == "done" and first.n_done == 4 and first.n_failed == 0, first.error
        assert first.dropped_params == learned
        # Every refusal came before the first answer; after it, exactly one request per trace.
        assert len(server.refusals) == len(learned)
        assert server.n_requests == 4 + len(learned)
        assert ProviderConnection.objects.get(pk=conn.pk).adaptations == {MODEL: learned}

        before = server.n_requests  # `conn` is the object loaded before the first run: the record is read fresh
        second = drive(run_over(project, manager, conn, make_judge_traces(project, 3, start=10)))
        assert second.state == "done" and second.n_done == 3, second.error
        assert server.n_requests - before == 3  # one request per trace, none refused
        assert len(server.refusals) == len(learned)
        assert second.dropped_params == learned  # the run says the form it was sent in
    finally:
        server.stop()


def test_the_folded_prompt_holds_the_whole_system_text(project, manager, fast_retries, o1_mini):
    trace = make_judge_traces(project, 1)
    standard = LLMServer().start()
    try:
        drive(run_over(project, manager, connect(project, manager, standard), trace))
        system, user = standard.requests[0]["messages"]
    finally:
        standard.stop()
    assert system["role"] == "system" and "JSON" in system["content"]
    conn = connection_save(project=project, by=manager, name="o1-mini", base_url=o1_mini.url, models=[MODEL])
    run = drive(
        judge_run_create(
            project=project, by=manager, provider="openai", connection=conn, model=MODEL, max_tokens=999, start=False
        )
    )
    assert run.state == "done", run.error
    sent = o1_mini.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert sent[0]["content"] == system["content"] + "\n\n" + user["content"]


def test_developer_role_keeps_every_message_and_folding_keeps_a_repair_conversation():
    messages = [
        {"role": "system", "content": "RULES"},
        {"role": "user", "content": "TRACE"},
        {"role": "assistant", "content": "bad"},
        {"role": "user", "content": "again"},
    ]
    as_developer = openai_chat.adapt_roles(messages, frozenset({"system_role"}))
    assert [m["role"] for m in as_developer] == ["developer", "user", "assistant", "user"]
    folded = openai_chat.adapt_roles(messages, frozenset({"system_role", "developer_role"}))
    assert folded == [
        {"role": "user", "content": "RULES\n\nTRACE"},
        {"role": "assistant", "content": "bad"},
        {"role": "user", "content": "again"},
    ]


def call_for(server):
    return base.Call(base_url=server.url, api_key="k", model="m", temperature=0.0, max_tokens=10, timeout=5)


@pytest.mark.parametrize(
    ("sent_role", "body", "param"),
    [
        (
            "developer",
            # Azure OpenAI on an API version before the developer role (llama_index issue 17748)
            {
                "error": {
                    "message": "Invalid value: 'developer'. Supported values are: 'system', 'assistant', 'user', "
                    "'function', and 'tool'.",
                    "type": "invalid_request_error",
                    "param": "messages[0].role",
                    "code": "invalid_value",
                }
            },
            "developer_role",
        ),
        (
            "system",
            {"object": "error", "message": "System role not supported", "type": "BadRequestError", "param": None},
            "system_role",
        ),
        (
            "system",
            {"error": {"message": "system messages are not supported for this model", "param": None}},
            "system_role",
        ),
    ],
)
def test_role_refusals_of_real_servers_name_the_role_sent(llm_server, sent_role, body, param):
    llm_server.push(Status(400, body))
    messages = [{"role": sent_role, "content": "rules"}, {"role": "user", "content": "trace"}]
    with pytest.raises(base.UnsupportedParameter) as exc:
        openai_chat.chat_complete(call_for(llm_server), messages, json_mode=False)
    assert exc.value.param == param


def test_a_role_refusal_with_nothing_left_to_adapt_stops_with_the_server_s_words(llm_server):
    llm_server.push(
        Status(400, {"error": {"message": "Unsupported value: 'messages[0].role' does not support 'user'."}})
    )
    with pytest.raises(base.PermanentError) as exc:
        openai_chat.chat_complete(call_for(llm_server), [{"role": "user", "content": "x"}], json_mode=False)
    assert not isinstance(exc.value, base.UnsupportedParameter)
    assert "does not support 'user'" in str(exc.value)


def test_a_max_tokens_refusal_is_not_taken_for_a_role_refusal(llm_server):
    llm_server.push(
        Status(
            400,
            {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model, whatever "
                    "the system message says.",
                    "param": "max_tokens",
                }
            },
        )
    )
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "trace"}]
    with pytest.raises(base.UnsupportedParameter) as exc:
        openai_chat.chat_complete(call_for(llm_server), messages, json_mode=False)
    assert exc.value.param == "max_tokens"


def test_connection_test_records_what_it_learns_and_starts_from_the_record(project, manager, o1_mini):
    conn = connect(project, manager, o1_mini)
    o1_mini.push(Reply("OK"))
    probe = connection_test(connection=conn)
    assert probe.ok and list(probe.dropped) == ["max_tokens", "temperature"]
    conn.refresh_from_db()
    assert conn.adaptations == {MODEL: ["max_tokens", "temperature"]}
    before = len(o1_mini.refusals)
    o1_mini.push(Reply("OK"))
    assert connection_test(connection=conn).ok and len(o1_mini.refusals) == before


def test_moving_a_connection_forgets_what_the_old_server_refused(project, manager, o1_mini):
    conn = connect(project, manager, o1_mini)
    ProviderConnection.objects.filter(pk=conn.pk).update(adaptations={MODEL: ["system_role"]})
    conn.refresh_from_db()
    moved = connection_save(
        project=project, by=manager, name=conn.name, base_url="http://127.0.0.1:9/v1", connection=conn
    )
    assert moved.adaptations == {}


def test_run_and_connection_pages_say_how_the_request_was_adapted(client, project, manager, fast_retries, o1_mini):
    conn = connect(project, manager, o1_mini)
    run = drive(run_over(project, manager, conn, make_judge_traces(project, 1)))
    client.force_login(manager)
    run_html = client.get(reverse("annotations:judge_run", args=[project.slug, run.pk])).content.decode()
    conn_html = client.get(reverse("annotations:judge_connection", args=[project.slug, conn.pk])).content.decode()
    for html in (run_html, conn_html):
        assert "the instructions are sent as a developer message" in html
        assert "folded into the first user message" in html
        assert "the limit is sent as max_completion_tokens" in html
    api = client.get(f"/api/projects/{project.slug}/judge-connections/{conn.pk}/").json()
    assert api["adaptations"] == {MODEL: ["system_role", "developer_role", "max_tokens", "temperature"]}
