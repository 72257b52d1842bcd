"""The trace list's "labelled": defined by the registered label state, nothing when none is."""

import pytest
from django.urls import reverse

from annotations.labels.trace_state import labelling_annotations
from annotations.models import Annotation
from tests.traces.viewer_factories import bare_trace, submitted_annotation
from traces.viewer import label_state
from traces.viewer.selectors import TraceFilters, trace_list_for_user, trace_rows_mark_labelled

pytestmark = pytest.mark.django_db


def labelled(viewer, project, **query):
    rows = trace_list_for_user(user=viewer, project=project, filters=TraceFilters.from_query(query))
    return {t.pk: t.is_labelled for t in trace_rows_mark_labelled(user=viewer, project=project, rows=rows)}


@pytest.fixture
def traces(project):
    done, draft, untouched = bare_trace(project), bare_trace(project), bare_trace(project)
    submitted_annotation(done)
    submitted_annotation(draft, state="draft")
    return done, draft, untouched


def test_annotations_registers_its_definition_of_labelled():
    assert label_state._LABELLED is labelling_annotations


def test_with_nothing_registered_no_trace_is_labelled(viewer, project, traces, monkeypatch):
    monkeypatch.setattr(label_state, "_LABELLED", None)
    assert set(labelled(viewer, project).values()) == {False}
    assert labelled(viewer, project, labelled="yes") == {}
    assert len(labelled(viewer, project, labelled="no")) == 3


def test_the_registered_definition_decides_with_the_user_and_project(viewer, project, traces, monkeypatch):
    calls = []

    def drafts_count(*, user, project):
        calls.append((user, project))
        return Annotation.objects.filter(state="draft")

    monkeypatch.setattr(label_state, "_LABELLED", None)
    label_state.trace_label_state_register(drafts_count)
    done, draft, untouched = traces

    assert labelled(viewer, project, labelled="yes") == {draft.pk: True}
    assert set(labelled(viewer, project, labelled="no")) == {done.pk, untouched.pk}
    assert calls[0] == (viewer, project)


@pytest.mark.parametrize("registered", [True, False])
def test_the_label_state_costs_no_query_of_its_own(
    client, manager, project, traces, monkeypatch, registered, django_assert_num_queries
):
    if not registered:
        monkeypatch.setattr(label_state, "_LABELLED", None)
    client.force_login(manager)
    # session, user, project, role, count, page rows
    with django_assert_num_queries(6):
        response = client.get("/api/projects/demo/traces/?labelled=no")
    assert response.json()["count"] == (2 if registered else 3)


def test_the_list_page_marks_labelled_rows(client, manager, project, traces):
    client.force_login(manager)
    html = client.get(reverse("trace_list", args=["demo"])).content.decode()
    assert html.count('title="Has at least one submitted annotation">labelled</span>') == 1
