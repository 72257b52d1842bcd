"""A NUL character in a query string is refused with 400, never a database error (500)."""

import pytest

pytestmark = pytest.mark.django_db


def test_api_filter_with_a_nul_is_a_400_naming_the_parameter(client, project, manager):
    client.force_login(manager)
    r = client.get(f"/api/projects/{project.slug}/analytics/framework-modes/?llm_name=a%00b")
    assert r.status_code == 400 and "llm_name" in r.json()["detail"]
    r = client.get("/api/queue/?project=%00x")
    assert r.status_code == 400 and "project" in r.json()["detail"]


def test_page_with_a_nul_in_the_query_gets_the_site_400_page(client, project, manager):
    client.force_login(manager)
    r = client.get(f"/p/{project.slug}/traces/?q=x%00")
    assert r.status_code == 400
