"""The project tab bar: tabs come from the registry, in order, filtered by the viewer's role."""

import re

import pytest
from django.urls import reverse

from traces.projects import tabs

pytestmark = pytest.mark.django_db


def tab_bar(client, user, project, url_name="project_detail"):
    client.force_login(user)
    html = client.get(reverse(url_name, kwargs={"slug": project.slug})).content.decode()
    return re.search(r'<nav class="tabs".*?</nav>', html, re.S).group(0)


def tab_labels(client, user, project, url_name="project_detail"):
    return re.findall(r"<a [^>]*>([^<]+)</a>", tab_bar(client, user, project, url_name))


@pytest.fixture
def registry(monkeypatch):
    """The registry as the apps filled it, restored after the test."""
    monkeypatch.setattr(tabs, "_TABS", dict(tabs._TABS))
    return tabs


def test_managers_see_every_installed_tab_in_order(client, project, manager):
    assert tab_labels(client, manager, project) == [
        "Overview",
        "Traces",
        "Search",
        "Import",
        "Rounds",
        "LLM judge",
        "Open codes",
        "Analytics",
        "Releases",
        "Members",
        "Settings",
    ]


def test_viewers_do_not_see_the_tabs_that_need_manage(client, project, viewer):
    assert tab_labels(client, viewer, project) == [
        "Overview",
        "Traces",
        "Search",
        "Rounds",
        "Open codes",
        "Analytics",
        "Releases",
        "Members",
    ]


def test_the_current_page_marks_its_tab(client, project, viewer):
    nav = tab_bar(client, viewer, project, "trace_list")
    assert re.findall(r'<a href="([^"]+)" aria-current="page">', nav) == [f"/p/{project.slug}/traces/"]


def test_a_registered_tab_shows_for_the_roles_with_its_capability(
    client, project, manager, annotator, viewer, registry
):
    registry.project_tab_register(
        key="queue", label="My queue", url_name="project_members", capability="annotate", order=75
    )
    assert tab_labels(client, manager, project)[-3:] == ["My queue", "Members", "Settings"]
    assert "My queue" in tab_labels(client, annotator, project)
    assert "My queue" not in tab_labels(client, viewer, project)


def test_a_tab_whose_page_is_not_installed_is_left_out(client, project, manager, registry):
    registry.project_tab_register(key="gone", label="Gone", url_name="no_such_page", capability="view", order=15)
    assert "Gone" not in tab_labels(client, manager, project)


def test_registering_a_key_again_replaces_its_tab(client, project, viewer, registry):
    registry.project_tab_register(key="members", label="People", url_name="project_members", capability="view", order=5)
    assert tab_labels(client, viewer, project)[0] == "People"
    assert "Members" not in tab_labels(client, viewer, project)


def test_an_unknown_capability_is_refused_at_registration(registry):
    with pytest.raises(ValueError, match="unknown capability"):
        registry.project_tab_register(key="x", label="X", url_name="project_detail", capability="admin", order=1)
