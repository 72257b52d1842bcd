"""API keys of judge runs: only the variables MAST_JUDGE_API_KEYS lists, only to their base URLs.

Issue 12, finding 1: a manager could name any environment variable of the worker (SECRET_KEY,
DATABASE_URL) as the key and a server of their own as the base URL, and the worker sent it there.
"""

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.judge.providers import keys
from annotations.judge.runs import judge_run_create
from annotations.models import JudgeRun
from tests.annotations.conftest import drive, make_judge_traces, post_run_api, post_run_form
from tests.llm_server import LLMServer

SECRET = "the-worker-secret-value-0123456789"
FOREIGN = "http://127.0.0.1:9/v1"

pytestmark = pytest.mark.django_db


@pytest.fixture
def allowed(settings, llm_server, monkeypatch):
    """JUDGE_TEST_KEY may go to the scripted server only; SECRET_KEY and DATABASE_URL hold a secret."""
    settings.MAST_JUDGE_API_KEYS = f"JUDGE_TEST_KEY={llm_server.url},OPENAI_API_KEY=https://api.openai.com/v1"
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-allowed-1")
    monkeypatch.setenv("SECRET_KEY", SECRET)
    monkeypatch.setenv("DATABASE_URL", f"postgres://u:{SECRET}@db/x")
    return settings


@pytest.fixture
def as_manager(client, project, manager):
    """The manager's client, with one trace in the project to run over."""
    make_judge_traces(project, 1)
    client.force_login(manager)
    return client


@pytest.fixture
def foreign_server():
    server = LLMServer().start()
    yield server
    server.stop()


def bearer_tokens(server) -> list[str]:
    return [h.get("authorization", "") for h in server.headers]


# ---------------------------------------------------------------- the rule (pure)


def test_a_key_may_go_to_its_url_and_the_paths_below_it():
    urls = ["https://api.openai.com/v1"]
    assert keys.url_allowed("https://api.openai.com/v1", urls)
    assert keys.url_allowed("https://API.openai.com:443/v1/", urls)
    assert keys.url_allowed("https://api.openai.com/v1/org", urls)
    assert not keys.url_allowed("https://api.openai.com/v1x", urls)
    assert not keys.url_allowed("http://api.openai.com/v1", urls)
    assert not keys.url_allowed("https://api.openai.com:8443/v1", urls)
    assert not keys.url_allowed("https://api.openai.com.evil.org/v1", urls)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com@evil.org/v1",
        "https://user:pw@api.openai.com/v1",
        "https://api.openai.com/v1?to=evil.org",
        "https://api.openai.com/v1#x",
        "https://api.openai.com/v1/../x",
        "https://api.openai.com/v1/%2e%2e/x",
        "ftp://api.openai.com/v1",
        "not a url",
    ],
)
def test_tricky_urls_never_match(url):
    assert not keys.url_allowed(url, ["https://api.openai.com/v1"])


def test_the_setting_lists_names_with_their_urls_and_refuses_malformed_entries():
    spec = "A=https://a.example/v1, A=http://127.0.0.1:8001/v1,B=https://b.example"
    assert keys.parse_allowed(spec) == {
        "A": ("https://a.example/v1", "http://127.0.0.1:8001/v1"),
        "B": ("https://b.example",),
    }
    assert keys.parse_allowed("") == {}
    for bad in ("OPENAI_API_KEY", "OPENAI_API_KEY=", "1X=https://a.example", "K=ftp://a.example"):
        with pytest.raises(ValueError, match="MAST_JUDGE_API_KEYS"):
            keys.parse_allowed(bad)


def test_with_the_setting_empty_not_even_openai_api_key_is_allowed(project, manager, settings, monkeypatch):
    settings.MAST_JUDGE_API_KEYS = ""  # the default
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    make_judge_traces(project, 1)
    with pytest.raises(ValidationError, match="allowed: none") as exc:
        judge_run_create(
            project=project,
            by=manager,
            provider="openai",
            base_url="https://api.openai.com/v1",
            model="m",
            api_key_env="OPENAI_API_KEY",
            start=False,
        )
    assert "api_key_env" in exc.value.message_dict


# ---------------------------------------------------------------- refused when a run is created

REFUSED = [
    ("SECRET_KEY", FOREIGN, "api_key_env"),
    ("DATABASE_URL", FOREIGN, "api_key_env"),
    ("JUDGE_TEST_KEY", FOREIGN, "base_url"),
]


@pytest.mark.parametrize(("name", "url", "field"), REFUSED)
def test_api_refuses_a_key_not_allowed_or_sent_elsewhere(as_manager, project, allowed, name, url, field):
    resp = post_run_api(as_manager, project, base_url=url, model="m", api_key_env=name)
    assert resp.status_code == 400, resp.content
    body = resp.json()
    assert list(body["errors"]) == [field]
    text = resp.content.decode()
    if field == "api_key_env":
        assert "JUDGE_TEST_KEY" in text and "OPENAI_API_KEY" in text  # the allowed names
    assert SECRET not in text and "sk-allowed-1" not in text  # never a value
    assert not JudgeRun.objects.exists()


def test_api_accepts_an_allowed_key_at_its_url(as_manager, project, allowed, llm_server):
    resp = post_run_api(as_manager, project, base_url=llm_server.url, model="m", api_key_env="JUDGE_TEST_KEY")
    assert resp.status_code == 201, resp.content


def test_a_run_without_a_key_may_use_any_base_url(as_manager, project, allowed):
    resp = post_run_api(as_manager, project, base_url=FOREIGN, model="m")
    assert resp.status_code == 201, resp.content


@pytest.mark.parametrize(("name", "url", "field"), REFUSED)
def test_form_refuses_a_key_not_allowed_or_sent_elsewhere(as_manager, project, allowed, name, url, field):
    resp = post_run_form(as_manager, project, base_url=url, model="m", api_key_env=name)
    assert resp.status_code == 200
    assert list(resp.context["form"].errors) == [field]
    assert "MAST_JUDGE_API_KEYS" in resp.content.decode() and SECRET not in resp.content.decode()
    assert not JudgeRun.objects.exists()


def test_prelabel_command_refuses_a_key_not_allowed(project, allowed):
    make_judge_traces(project, 1)
    with pytest.raises(CommandError, match="api_key_env"):
        call_command(
            "prelabel", "--project", project.slug, "--base-url", FOREIGN, "--model", "m", "--api-key-env", "SECRET_KEY"
        )
    assert not JudgeRun.objects.exists()


# ---------------------------------------------------------------- refused by the worker


def keyless_run(project, manager, server):
    return judge_run_create(
        project=project, by=manager, provider="openai", base_url=server.url, model="m", timeout=5, start=False
    )


def test_worker_sends_nothing_for_a_run_row_forced_to_secret_key(project, manager, allowed, llm_server, fast_retries):
    make_judge_traces(project, 2)
    run = keyless_run(project, manager, llm_server)
    JudgeRun.objects.filter(pk=run.pk).update(api_key_env="SECRET_KEY")  # past every form: straight to the row
    run = drive(run)
    assert run.state == "failed" and "SECRET_KEY" in run.error and "nothing was sent" in run.error
    assert SECRET not in run.error
    assert llm_server.n_requests == 0
    assert not any(SECRET in token for token in bearer_tokens(llm_server))


def test_worker_does_not_send_an_allowed_key_to_another_server(
    project, manager, allowed, llm_server, foreign_server, fast_retries
):
    make_judge_traces(project, 1)
    run = keyless_run(project, manager, foreign_server)
    JudgeRun.objects.filter(pk=run.pk).update(api_key_env="JUDGE_TEST_KEY")
    run = drive(run)
    assert run.state == "failed" and "may only be sent to" in run.error
    assert foreign_server.n_requests == 0 and llm_server.n_requests == 0


def test_an_allowed_key_reaches_its_allowed_server(project, manager, allowed, llm_server, fast_retries):
    make_judge_traces(project, 2)
    run = judge_run_create(
        project=project,
        by=manager,
        provider="openai",
        base_url=llm_server.url,
        model="m",
        api_key_env="JUDGE_TEST_KEY",
        timeout=5,
        start=False,
    )
    run = drive(run)
    assert run.state == "done" and run.n_done == 2
    assert bearer_tokens(llm_server) == ["Bearer sk-allowed-1"] * 2


@pytest.mark.parametrize("value", ["OPENAI_API_KEY", "BAD NAME=https://api.openai.com/v1", "KEY=ftp://host/v1"])
def test_a_malformed_key_list_fails_the_system_check(settings, value):
    from annotations.judge.checks import check_judge_api_keys

    settings.MAST_JUDGE_API_KEYS = value
    errors = check_judge_api_keys()
    assert [e.id for e in errors] == ["annotations.E001"] and "MAST_JUDGE_API_KEYS" in errors[0].msg


def test_a_good_key_list_passes_the_system_check(settings):
    from annotations.judge.checks import check_judge_api_keys

    settings.MAST_JUDGE_API_KEYS = "OPENAI_API_KEY=https://api.openai.com/v1,VLLM_KEY=http://127.0.0.1:8001/v1"
    assert check_judge_api_keys() == []
