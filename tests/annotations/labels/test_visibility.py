"""The blind rule (annotations.labels.visibility) and every workspace endpoint that shows labels.

Endpoints covered here: GET /api/projects/<slug>/traces/<id>/annotations/ (other raters' labels),
the labelling page (its embedded suggestions), GET my annotation and its history (only mine).
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.labels.services import annotation_get_or_create, annotation_save
from annotations.labels.visibility import annotations_visible_to, trace_is_blind
from annotations.models import Annotation
from tests.annotations.workspace_factories import make_llm_annotation, make_round, make_trace

pytestmark = pytest.mark.django_db

SECRET = "judge says so"  # the rationale every LLM label carries in these tests


@pytest.fixture
def trace(project):
    return make_trace(project, title="blind")


def human_label(trace, user, *, round=None, rationale="human secret"):
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=trace.project.taxonomy_version, round=round)
    annotation_save(
        annotation=ann,
        by=user,
        base_revision=ann.revision,
        labels=[{"code": "2.1", "decision": "present", "evidence": [], "rationale": rationale}],
        task_success="no",
        notes="",
        open_codes=[],
    )
    return ann


def api_visible(user, trace):
    c = APIClient()
    c.force_authenticate(user)
    return c.get(f"/api/projects/{trace.project.slug}/traces/{trace.pk}/annotations/")


def visible_raters(user, trace) -> list[str]:
    r = api_visible(user, trace)
    assert r.status_code == 200, r.content
    return sorted(a["rater"]["name"] for a in r.json()["results"])


def page_others(client, user, trace, round=None) -> list[dict]:
    client.force_login(user)
    path = reverse("annotations:workspace", kwargs={"slug": trace.project.slug, "pk": trace.pk})
    r = client.get(path + (f"?round={round.pk}" if round else ""))
    assert r.status_code == 200
    text = r.content.decode()
    start = text.index('<script id="ws-config" type="application/json">') + len(
        '<script id="ws-config" type="application/json">'
    )
    return json.loads(text[start : text.index("</script>", start)])["others"]


# ------------------------------------------------------------------ outside rounds


def test_annotator_never_sees_another_humans_labels_outside_rounds(project, trace, annotator, annotator2):
    project.reveal_suggestions = True
    project.save()
    human_label(trace, annotator2)
    assert visible_raters(annotator, trace) == []


def test_llm_suggestions_are_hidden_unless_the_project_reveals_them(project, trace, annotator):
    make_llm_annotation(trace)
    assert visible_raters(annotator, trace) == []
    project.reveal_suggestions = True
    project.save()
    assert visible_raters(annotator, trace) == ["judge-x"]


def test_revealed_suggestion_is_flagged_as_one(project, trace, annotator):
    project.reveal_suggestions = True
    project.save()
    make_llm_annotation(trace, codes=("1.3",))
    item = api_visible(annotator, trace).json()["results"][0]
    assert item["is_suggestion"] is True
    assert item["labels"][0]["code"] == "1.3"


def test_workspace_page_embeds_suggestions_only_when_revealed(client, project, trace, annotator):
    make_llm_annotation(trace)
    assert page_others(client, annotator, trace) == []
    project.reveal_suggestions = True
    project.save()
    assert [o["rater"] for o in page_others(client, annotator, trace)] == ["judge-x"]


# ------------------------------------------------------------------ open rounds: nothing can reveal


def test_open_round_hides_llm_suggestions_even_when_revealed(project, trace, annotator):
    project.reveal_suggestions = True
    project.save()
    make_llm_annotation(trace)
    make_round(project, traces=[trace], annotators=[annotator])
    assert trace_is_blind(trace_id=trace.pk)
    assert visible_raters(annotator, trace) == []


def test_open_round_hides_llm_labels_inside_the_round(project, trace, annotator):
    project.reveal_suggestions = True
    project.save()
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    make_llm_annotation(trace, round=rnd)
    assert visible_raters(annotator, trace) == []
    assert page_others(APIClientless(), annotator, trace, round=rnd) == []


def test_open_round_hides_the_other_annotators_labels_on_every_endpoint(client, project, trace, annotator, annotator2):
    project.reveal_suggestions = True
    project.save()
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2])
    human_label(trace, annotator2, round=rnd, rationale="round secret")
    assert visible_raters(annotator, trace) == []
    assert page_others(client, annotator, trace, round=rnd) == []
    c = APIClient()
    c.force_authenticate(annotator)
    mine = c.get(f"/api/projects/{project.slug}/traces/{trace.pk}/annotation/?round={rnd.pk}")
    history = c.get(f"/api/projects/{project.slug}/traces/{trace.pk}/annotation/history/?round={rnd.pk}")
    assert mine.json()["labels"] == [] and history.json()["results"] == []
    assert b"round secret" not in mine.content + history.content


def test_manager_who_annotates_an_open_round_is_blind_too(project, trace, manager, annotator):
    rnd = make_round(project, traces=[trace], annotators=[manager, annotator])
    human_label(trace, annotator, round=rnd)
    assert visible_raters(manager, trace) == []


def test_manager_outside_the_round_sees_labels_to_adjudicate(project, trace, manager, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    human_label(trace, annotator, round=rnd)
    assert visible_raters(manager, trace) == ["ann1"]


# ------------------------------------------------------------------ review


def test_review_reveals_round_labels_when_the_round_allows_it(project, trace, annotator, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2])
    human_label(trace, annotator2, round=rnd)
    mine = human_label(trace, annotator, round=rnd, rationale="mine")
    Annotation.objects.filter(pk=mine.pk).update(state=Annotation.State.SUBMITTED)  # anti-anchoring: hers first
    rnd.state = "review"
    rnd.save()
    assert visible_raters(annotator, trace) == ["ann2"]


def test_review_keeps_labels_hidden_when_the_round_does_not_reveal(project, trace, annotator, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2], reveal_in_review=False)
    human_label(trace, annotator2, round=rnd)
    rnd.state = "review"
    rnd.save()
    assert visible_raters(annotator, trace) == []


def test_trace_in_review_and_in_another_open_round_stays_blind(project, trace, annotator, annotator2):
    old = make_round(project, traces=[trace], annotators=[annotator, annotator2], name="old")
    human_label(trace, annotator2, round=old)
    old.state = "review"
    old.save()
    make_round(project, traces=[trace], annotators=[annotator], name="new")
    assert visible_raters(annotator, trace) == []


# ------------------------------------------------------------------ viewers and outsiders


def test_viewer_is_read_only(project, trace, viewer, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator2])
    human_label(trace, annotator2, round=rnd)
    rnd.state = "review"
    rnd.save()
    assert visible_raters(viewer, trace) == ["ann2"]
    c = APIClient()
    c.force_authenticate(viewer)
    put = c.put(
        f"/api/projects/{project.slug}/traces/{trace.pk}/annotation/", {"revision": 0, "labels": []}, format="json"
    )
    assert put.status_code == 403


def test_viewer_sees_nothing_of_an_open_round(project, trace, viewer, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator2])
    human_label(trace, annotator2, round=rnd)
    assert visible_raters(viewer, trace) == []


def test_outsider_gets_404_on_every_workspace_endpoint(client, project, trace, outsider, annotator):
    human_label(trace, annotator)
    c = APIClient()
    c.force_authenticate(outsider)
    base = f"/api/projects/{project.slug}"
    for path in (
        f"{base}/traces/{trace.pk}/annotations/",
        f"{base}/traces/{trace.pk}/annotation/",
        f"{base}/traces/{trace.pk}/annotation/history/",
        f"{base}/open-codes/",
    ):
        assert c.get(path).status_code == 404, path
    assert c.get(f"/api/queue/?project={project.slug}").status_code == 404
    client.force_login(outsider)
    assert (
        client.get(reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": trace.pk})).status_code == 404
    )


def test_own_annotations_are_always_visible(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    mine = human_label(trace, annotator, round=rnd)
    assert list(annotations_visible_to(user=annotator, project=project)) == [Annotation.objects.get(pk=mine.pk)]


def test_visible_annotations_api_query_count_is_fixed(project, trace, manager, django_assert_num_queries):
    for i in range(4):
        make_llm_annotation(trace, name=f"judge-{i}", codes=("1.1", "2.2"))
    c = APIClient()
    c.force_authenticate(manager)
    # membership, trace, count, annotations, labels+modes
    with django_assert_num_queries(6):
        r = c.get(f"/api/projects/{project.slug}/traces/{trace.pk}/annotations/")
    assert r.json()["count"] == 4


class APIClientless:
    """A Django test client for the page helper where no `client` fixture is at hand."""

    def __new__(cls):
        from django.test import Client

        return Client()


# ------------------------------------------------------------------ open codes (issue 12, finding 4)


def _coded(trace, user, codes, *, round=None):
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=trace.project.taxonomy_version, round=round)
    annotation_save(
        annotation=ann, by=user, base_revision=ann.revision, labels=[], task_success="no", notes="", open_codes=codes
    )
    return ann


def test_annotator_does_not_see_another_annotators_open_codes_while_round_is_open(
    project, trace, annotator, annotator2
):
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2])
    _coded(trace, annotator2, ["ann2 private wording"], round=rnd)
    _coded(trace, annotator, ["my own code"], round=rnd)
    client = APIClient()
    client.force_authenticate(annotator)
    for q in ("", "private", "ann2"):
        body = client.get(f"/api/projects/{project.slug}/open-codes/", {"q": q}).json()
        assert "ann2 private wording" not in json.dumps(body)
    names = [c["name"] for c in client.get(f"/api/projects/{project.slug}/open-codes/").json()["results"]]
    assert names == ["my own code"]
    html = client.get(reverse("annotations:workspace", args=[project.slug, trace.pk])).content.decode()
    assert "ann2 private wording" not in html


def test_a_shared_code_counts_only_the_uses_the_annotator_may_see(project, trace, annotator, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2])
    _coded(trace, annotator2, ["loop"], round=rnd)
    _coded(make_trace(project, title="outside"), annotator, ["loop"])
    client = APIClient()
    client.force_authenticate(annotator)
    rows = client.get(f"/api/projects/{project.slug}/open-codes/").json()["results"]
    assert [(r["name"], r["n_uses"]) for r in rows] == [("loop", 1)]


def test_open_codes_of_a_round_in_review_wait_for_her_own_submission(project, trace, annotator, annotator2):
    """Issue 27: another rater's code is known where her labels are: in review, and only on a trace
    the annotator has submitted herself (anti-anchoring), as on the labelling page."""
    rnd = make_round(project, traces=[trace], annotators=[annotator, annotator2])
    _coded(trace, annotator2, ["ann2 wording"], round=rnd)
    rnd.state = "review"
    rnd.save(update_fields=["state"])
    client = APIClient()
    client.force_authenticate(annotator)
    names = [c["name"] for c in client.get(f"/api/projects/{project.slug}/open-codes/").json()["results"]]
    assert names == []
