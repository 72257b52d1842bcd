"""Who sees what: each role against each project page and API endpoint."""

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token

from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from traces.models import Membership

ROLES = ["manager", "annotator", "viewer", "outsider"]


@pytest.fixture
def users(manager, annotator, viewer, outsider):
    return {"manager": manager, "annotator": annotator, "viewer": viewer, "outsider": outsider}


@pytest.mark.parametrize(("role", "status"), [("manager", 200), ("annotator", 200), ("viewer", 200), ("outsider", 404)])
@pytest.mark.parametrize("url_name", ["project_detail", "project_members"])
def test_project_pages_by_role(client, project, users, role, status, url_name):
    client.force_login(users[role])
    assert client.get(reverse(url_name, kwargs={"slug": project.slug})).status_code == status


@pytest.mark.parametrize(("role", "status"), [("manager", 302), ("annotator", 403), ("viewer", 403), ("outsider", 404)])
def test_only_managers_change_members(client, project, users, role, status):
    newcomer = UserFactory(username="newcomer")
    client.force_login(users[role])
    response = client.post(
        reverse("project_members", kwargs={"slug": project.slug}), {"username": "newcomer", "role": "viewer"}
    )
    assert response.status_code == status
    assert Membership.objects.filter(user=newcomer).exists() == (role == "manager")


def test_project_list_shows_only_my_projects(client, project, annotator):
    other = ProjectFactory(slug="secret", name="Secret corpus")
    MembershipFactory(project=other, user=UserFactory(username="someone"), role="manager")
    client.force_login(annotator)
    html = client.get(reverse("home")).content.decode()
    assert "Demo project" in html
    assert "Secret corpus" not in html


def test_anonymous_users_are_sent_to_login(client, project):
    response = client.get(reverse("project_detail", kwargs={"slug": project.slug}))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize(("role", "status"), [("manager", 200), ("annotator", 200), ("viewer", 200), ("outsider", 404)])
def test_project_api_by_role(api_client, project, users, role, status):
    api_client.force_authenticate(users[role])
    assert api_client.get(f"/api/projects/{project.slug}/").status_code == status
    assert api_client.get(f"/api/projects/{project.slug}/members/").status_code == status


@pytest.mark.parametrize(("role", "status"), [("manager", 200), ("annotator", 403), ("viewer", 403), ("outsider", 404)])
def test_member_api_writes_need_manager(api_client, project, users, role, status):
    UserFactory(username="newcomer")
    api_client.force_authenticate(users[role])
    response = api_client.post(f"/api/projects/{project.slug}/members/", {"username": "newcomer", "role": "viewer"})
    assert response.status_code == status


def test_project_api_list_is_paginated_and_scoped(api_client, project, annotator, django_assert_num_queries):
    for i in range(3):
        MembershipFactory(project=ProjectFactory(slug=f"p{i}"), user=annotator, role="viewer")
    ProjectFactory(slug="not-mine")
    api_client.force_authenticate(annotator)
    with django_assert_num_queries(2):  # count + page
        body = api_client.get("/api/projects/").json()
    assert body["count"] == 4
    assert {p["slug"] for p in body["results"]} == {"demo", "p0", "p1", "p2"}


def test_token_auth_works_for_scripts(client, project, annotator):
    token = Token.objects.create(user=annotator)
    response = client.get("/api/projects/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200 and response.json()["count"] == 1
    assert client.get("/api/projects/", HTTP_AUTHORIZATION="Token wrong").status_code == 401


def test_profile_page_creates_and_replaces_the_token(client, annotator):
    client.force_login(annotator)
    client.post(reverse("profile"))
    first = Token.objects.get(user=annotator).key
    client.post(reverse("profile"))
    second = Token.objects.get(user=annotator).key
    assert first != second
    assert second in client.get(reverse("profile")).content.decode()


def test_drf_create_token_command_works(annotator, capsys):
    call_command("drf_create_token", annotator.username)
    assert Token.objects.get(user=annotator).key in capsys.readouterr().out


def test_csrf_is_enforced_on_session_posts(project, manager):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    response = client.post(
        reverse("project_members", kwargs={"slug": project.slug}), {"username": "x", "role": "viewer"}
    )
    assert response.status_code == 403


def test_last_manager_cannot_be_removed(client, project, manager):
    client.force_login(manager)
    client.post(reverse("project_members", kwargs={"slug": project.slug}), {"remove": manager.username})
    assert Membership.objects.filter(project=project, user=manager, role="manager").exists()
