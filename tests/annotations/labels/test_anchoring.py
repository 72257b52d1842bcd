"""Anti-anchoring: an annotator sees other raters' labels on a trace only after she has submitted
her own for it, except non-human suggestions where the manager turned them on (pre-labelling)."""

from __future__ import annotations

from annotations.models import Annotation
from tests.annotations.labels.test_visibility import human_label, page_others, visible_raters
from tests.annotations.workspace_factories import make_llm_annotation, make_round, make_trace


def _closed_round_with_peer_label(project, annotator2, trace):
    rnd = make_round(project, traces=[trace], annotators=[annotator2], state="review", name="Old round")
    human_label(trace, annotator2, round=rnd, rationale="peer reading")
    rnd.state = "closed"
    rnd.save()
    return rnd


def _submit(trace, user):
    ann = human_label(trace, user, rationale="my own reading")
    Annotation.objects.filter(pk=ann.pk).update(state=Annotation.State.SUBMITTED)


def test_closed_round_peers_wait_for_her_own_submission(client, project, annotator, annotator2):
    trace = make_trace(project, title="after the round")
    _closed_round_with_peer_label(project, annotator2, trace)
    assert visible_raters(annotator, trace) == []
    assert page_others(client, annotator, trace) == []
    _submit(trace, annotator)
    assert visible_raters(annotator, trace) == ["ann2"]
    assert [o["rater"] for o in page_others(client, annotator, trace)] == ["ann2"]


def test_a_draft_of_her_own_is_not_enough(client, project, annotator, annotator2):
    trace = make_trace(project, title="draft only")
    _closed_round_with_peer_label(project, annotator2, trace)
    human_label(trace, annotator, rationale="still a draft")
    assert visible_raters(annotator, trace) == []


def test_llm_suggestions_show_at_once_when_the_manager_turned_them_on(project, annotator, annotator2):
    trace = make_trace(project, title="pre-labelled")
    _closed_round_with_peer_label(project, annotator2, trace)
    make_llm_annotation(trace, name="judge-x")
    project.reveal_suggestions = True
    project.save()
    assert visible_raters(annotator, trace) == ["judge-x"]  # the human peer still waits


def test_llm_suggestions_wait_too_when_suggestions_are_off(project, annotator):
    trace = make_trace(project, title="judge only")
    make_llm_annotation(trace, name="judge-x")
    _submit(trace, annotator)
    assert visible_raters(annotator, trace) == []  # the blind rule: suggestions off hides them anyway


def test_manager_is_not_held_back(project, manager, annotator2):
    trace = make_trace(project, title="adjudicate")
    _closed_round_with_peer_label(project, annotator2, trace)
    assert visible_raters(manager, trace) == ["ann2"]


def test_workspace_says_labels_are_held_back(client, project, annotator):
    trace = make_trace(project, title="note")
    client.force_login(annotator)
    body = client.get(f"/p/{project.slug}/traces/{trace.pk}/label/").content.decode()
    assert "data-anchoring" in body
    _submit(trace, annotator)
    assert "data-anchoring" not in client.get(f"/p/{project.slug}/traces/{trace.pk}/label/").content.decode()
