"""Every response carries the Content-Security-Policy; only the Redoc page widens it, and only for its worker."""

from __future__ import annotations

import pytest

EXPECTED = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}


def directives(response) -> dict[str, list[str]]:
    policy = {}
    for part in response["Content-Security-Policy"].split(";"):
        name, *values = part.split()
        policy[name] = values
    return policy


def test_an_html_page_has_the_policy(client, manager, project):
    client.force_login(manager)
    response = client.get(f"/p/{project.slug}/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert directives(response) == EXPECTED


def test_an_api_response_has_the_policy(api_client, manager, project):
    api_client.force_authenticate(manager)
    response = api_client.get("/api/projects/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert directives(response) == EXPECTED


@pytest.mark.django_db
def test_a_refusal_before_any_view_has_the_policy(client, settings):
    settings.ALLOWED_HOSTS = ["mast.example.org"]
    response = client.get("/login/", HTTP_HOST="evil.example.com")
    assert response.status_code == 400
    assert directives(response) == EXPECTED


def test_swagger_needs_no_inline_script(client, manager):
    client.force_login(manager)
    html = client.get("/api/docs/").content.decode()
    assert "<script>" not in html and "?script" in html
    assert directives(client.get("/api/docs/?script")) == EXPECTED


def test_only_redoc_may_start_a_worker_from_a_blob(client, manager):
    client.force_login(manager)
    assert directives(client.get("/api/redoc/")) == {**EXPECTED, "worker-src": ["'self'", "blob:"]}
