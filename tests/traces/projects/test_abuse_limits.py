"""Failed sign-ins are limited per user name and per address; API tokens are rate limited."""

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from traces.projects import login as login_module


@pytest.fixture
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def _attempt(client, username, password, **extra):
    return client.post("/login/", {"username": username, "password": password}, **extra)


def test_after_ten_failures_even_the_right_password_is_refused_with_429(client, annotator, password, fresh_cache):
    for _ in range(10):
        assert _attempt(client, annotator.username, "wrong").status_code == 200
    response = _attempt(client, annotator.username, password)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_failures_for_one_user_name_do_not_block_another(client, annotator, annotator2, password, fresh_cache):
    for _ in range(10):
        _attempt(client, annotator.username, "wrong")
    assert _attempt(client, annotator2.username, password).status_code == 302


def test_one_address_trying_many_user_names_is_blocked(client, annotator, password, settings, fresh_cache):
    settings.MAST_LOGIN_FAILURES = (10, 5)
    for i in range(5):
        _attempt(client, f"guess{i}", "wrong")
    assert _attempt(client, annotator.username, password).status_code == 429
    # Another address is not affected.
    assert _attempt(client, annotator.username, password, REMOTE_ADDR="10.9.8.7").status_code == 302


def test_successful_sign_ins_are_not_counted(client, annotator, password, fresh_cache):
    for _ in range(15):
        assert _attempt(client, annotator.username, password).status_code == 302
        client.logout()


def test_the_limit_lifts_when_old_failures_leave_the_window(
    client, annotator, password, settings, monkeypatch, fresh_cache
):
    settings.MAST_LOGIN_FAILURES = (2, 50)
    now = [1_000_000.0]
    monkeypatch.setattr(login_module.time, "time", lambda: now[0])
    _attempt(client, annotator.username, "wrong")
    _attempt(client, annotator.username, "wrong")
    assert _attempt(client, annotator.username, password).status_code == 429
    now[0] += login_module.WINDOW_SECONDS + 1
    assert _attempt(client, annotator.username, password).status_code == 302


def test_forwarded_address_counts_only_behind_configured_proxies(rf, settings):
    request = rf.post("/login/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5, 10.0.0.1")
    settings.MAST_NUM_PROXIES = 0
    assert login_module.client_address(request) == "10.0.0.1"
    settings.MAST_NUM_PROXIES = 1
    assert login_module.client_address(request) == "10.0.0.1"
    settings.MAST_NUM_PROXIES = 2
    assert login_module.client_address(request) == "203.0.113.5"


def test_token_clients_are_rate_limited_and_sessions_are_not(annotator, project, settings, fresh_cache):
    settings.MAST_API_TOKEN_RATE = "3/minute"
    token = Token.objects.create(user=annotator)
    scripted = APIClient()
    scripted.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    codes = [scripted.get("/api/projects/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    browser = APIClient()
    browser.force_login(annotator)
    assert [browser.get("/api/projects/").status_code for _ in range(5)] == [200] * 5
