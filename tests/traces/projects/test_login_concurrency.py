"""Concurrent wrong passwords against a live server with the Redis cache: every failure is counted
(the cache's atomic increment), and together they cannot check more passwords than the limit."""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.test import RequestFactory

from traces.projects.login import login_failures

N = 50


@pytest.fixture
def redis_cache(settings):
    """The cache the web processes share in production (Redis), on this run's own database, with a
    prefix of its own so that nothing else's keys are touched."""
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": broker,
            "KEY_PREFIX": f"login-test-{uuid.uuid4().hex}",
        }
    }
    return settings


def _wrong_passwords_at_once(live_server, username: str) -> list[int]:
    """N clients, each with its own session and CSRF token, post a wrong password at the same moment."""
    start = threading.Barrier(N)

    def attempt(_):
        with requests.Session() as s:
            s.get(f"{live_server.url}/login/", timeout=30)
            start.wait(timeout=60)
            r = s.post(
                f"{live_server.url}/login/",
                data={"username": username, "password": "wrong", "csrfmiddlewaretoken": s.cookies["csrftoken"]},
                headers={"Referer": f"{live_server.url}/login/"},
                timeout=60,
                allow_redirects=False,
            )
            return r.status_code

    with ThreadPoolExecutor(max_workers=N) as pool:
        return list(pool.map(attempt, range(N)))


def _user_failures(username: str) -> int:
    request = RequestFactory().post("/login/", {"username": username}, REMOTE_ADDR="127.0.0.1")
    return login_failures(request)[f"login-fail:user:{username}"]


def test_fifty_concurrent_wrong_passwords_are_all_counted(live_server, redis_cache, annotator):
    redis_cache.MAST_LOGIN_FAILURES = (1000, 1000)  # no limit reached: every attempt checks its password
    codes = _wrong_passwords_at_once(live_server, annotator.username)
    assert codes == [200] * N  # the form again, with its error
    assert _user_failures(annotator.username) == N


def test_concurrent_guesses_check_no_more_passwords_than_the_limit(live_server, redis_cache, annotator):
    redis_cache.MAST_LOGIN_FAILURES = (10, 1000)
    codes = _wrong_passwords_at_once(live_server, annotator.username)
    assert (codes.count(200), codes.count(429)) == (10, N - 10)
    assert _user_failures(annotator.username) == 10
