"""Workspace API and pages: read/save/submit my annotation, history, open codes, queue."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.models import Annotation, AnnotationEvent
from tests.annotations.workspace_factories import all_labels, client_for, db_state, make_round, make_trace, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace(project):
    return make_trace(project, n_steps=6, lines_per_step=3, title="t1")


def body(revision, labels=None, **kw):
    return {
        "revision": revision,
        "labels": labels if labels is not None else [{"code": "1.1", "decision": "present"}],
        "task_success": kw.get("task_success", "no"),
        "notes": kw.get("notes", ""),
        "open_codes": kw.get("open_codes", []),
    }


# ------------------------------------------------------------------ read and save


def test_get_before_any_save_returns_an_empty_annotation_and_stores_nothing(trace, annotator):
    r = client_for(annotator).get(url(trace))
    assert r.status_code == 200
    assert (r.json()["id"], r.json()["revision"], r.json()["labels"]) == (None, 0, [])
    assert Annotation.objects.count() == 0


def test_first_put_creates_my_annotation(trace, annotator):
    r = client_for(annotator).put(url(trace), body(0, open_codes=["loops"]), format="json")
    assert r.status_code == 200, r.json()
    data = r.json()
    assert (data["revision"], data["state"], data["task_success"], data["open_codes"]) == (1, "draft", "no", ["loops"])
    assert data["labels"] == [{"code": "1.1", "decision": "present", "evidence": [], "rationale": ""}]
    assert Annotation.objects.get().rater.user == annotator


def test_same_put_twice_returns_200_unchanged(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    before = db_state()
    r = c.put(url(trace), body(1), format="json")
    assert (r.status_code, r.json()["revision"]) == (200, 1)
    assert db_state() == before


def test_stale_put_gets_409_with_the_current_state_and_changes_nothing(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    c.put(url(trace), body(1, notes="second"), format="json")
    before = db_state()
    r = c.put(url(trace), body(1, notes="from a stale tab"), format="json")
    assert r.status_code == 409
    assert r.json()["current"]["revision"] == 2
    assert r.json()["current"]["notes"] == "second"
    assert "revision 1" in r.json()["detail"]
    assert db_state() == before


@pytest.mark.parametrize(
    ("labels", "extra", "message"),
    [
        ([{"code": "7.7", "decision": "present"}], {}, "unknown mode code '7.7'"),
        ([{"code": "1.1", "decision": "present", "evidence": [{"step": 99}]}], {}, "step 99 does not exist"),
        ([{"code": "1.1", "decision": "present", "evidence": [{"lines": [0, 2]}]}], {}, "outside the trace"),
        ([{"code": "1.1", "decision": "present", "rationale": "r" * 2001}], {}, "limit is 2,000"),
        ([], {"notes": "n" * 10_001}, "limit is 10,000"),
        ([], {"open_codes": ["c" * 81]}, "limit is 80"),
        ([{"code": "1.1"}], {}, "decision"),
    ],
)
def test_bad_input_gets_400_naming_the_problem_and_nothing_is_stored(trace, annotator, labels, extra, message):
    c = client_for(annotator)
    c.put(url(trace), body(0, notes="kept"), format="json")
    before = db_state()
    r = c.put(url(trace), body(1, labels, **extra), format="json")
    assert r.status_code == 400
    text = r.json()["detail"] + " ".join(e["field"] + " " + e["message"] for e in r.json().get("errors", []))
    assert message in text
    assert db_state() == before


def test_bad_first_put_does_not_leave_an_empty_annotation_behind(trace, annotator):
    r = client_for(annotator).put(url(trace), body(0, [{"code": "9.9", "decision": "absent"}]), format="json")
    assert r.status_code == 400
    assert Annotation.objects.count() == 0


def test_viewer_cannot_save(trace, viewer):
    before = db_state()
    r = client_for(viewer).put(url(trace), body(0), format="json")
    assert r.status_code == 403
    assert db_state() == before


def test_outsider_gets_404(trace, outsider):
    assert client_for(outsider).put(url(trace), body(0), format="json").status_code == 404
    assert client_for(outsider).get(url(trace)).status_code == 404


def test_my_put_never_touches_another_raters_annotation(trace, annotator, annotator2):
    client_for(annotator).put(url(trace), body(0, notes="mine"), format="json")
    r = client_for(annotator2).put(url(trace), body(0, notes="theirs"), format="json")
    assert r.status_code == 200
    assert sorted(Annotation.objects.values_list("rater__name", "notes")) == [("ann1", "mine"), ("ann2", "theirs")]


def test_round_not_mine_is_404(project, trace, annotator, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    r = client_for(annotator2).put(url(trace, round=rnd), body(0), format="json")
    assert r.status_code == 404


def test_saving_in_a_closed_round_is_refused(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    c = client_for(annotator)
    assert c.put(url(trace, round=rnd), body(0), format="json").status_code == 200
    rnd.state = "closed"
    rnd.save()
    before = db_state()
    r = c.put(url(trace, round=rnd), body(1, notes="late"), format="json")
    assert r.status_code == 403 and "closed" in r.json()["detail"]
    assert db_state() == before


# ------------------------------------------------------------------ submit and history


def test_submit_incomplete_is_400_listing_the_missing_modes(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    r = c.post(url(trace, "submit/"), {"revision": 1}, format="json")
    assert r.status_code == 400
    assert "1.2" in r.json()["detail"]


def test_submit_twice_is_idempotent(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0, all_labels(trace.project.taxonomy_version)), format="json")
    first = c.post(url(trace, "submit/"), {"revision": 1}, format="json")
    state = db_state()
    second = c.post(url(trace, "submit/"), {"revision": 1}, format="json")
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["state"] == second.json()["state"] == "submitted"
    assert second.json()["revision"] == 2
    assert db_state() == state


def test_submit_without_any_save_is_400(trace, annotator):
    r = client_for(annotator).post(url(trace, "submit/"), {"revision": 0}, format="json")
    assert r.status_code == 400


def test_history_lists_every_change_with_before_and_after(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    c.put(url(trace), body(1, notes="more"), format="json")
    r = c.get(url(trace, "history/"))
    assert r.status_code == 200
    events = r.json()["results"]
    assert [(e["revision"], e["action"], e["by"]) for e in events] == [(1, "save", "ann1"), (2, "save", "ann1")]
    assert (events[1]["before"]["notes"], events[1]["after"]["notes"]) == ("", "more")


def test_open_codes_endpoint_lists_project_codes_with_counts(project, trace, annotator, annotator2):
    t2 = make_trace(project, title="t2")
    client_for(annotator).put(url(trace), body(0, open_codes=["loop", "bad handoff"]), format="json")
    client_for(annotator2).put(url(t2), body(0, open_codes=["loop"]), format="json")
    r = client_for(annotator).get(f"/api/projects/{project.slug}/open-codes/")
    # her own uses only: ann2's labels outside rounds are hidden from her (issue 27)
    assert [(c["name"], c["n_uses"]) for c in r.json()["results"]] == [("bad handoff", 1), ("loop", 1)]
    assert client_for(annotator).get(f"/api/projects/{project.slug}/open-codes/?q=hand").json()["count"] == 1


# ------------------------------------------------------------------ queue


def test_queue_lists_round_work_first_then_traces_with_status(project, trace, annotator):
    t2 = make_trace(project, title="t2")
    t3 = make_trace(project, title="t3")
    rnd = make_round(project, traces=[t3], annotators=[annotator])
    client_for(annotator).put(url(t2), body(0), format="json")
    r = client_for(annotator).get("/api/queue/")
    assert r.status_code == 200
    items = [(i["trace"], i["round"], i["status"]) for i in r.json()["results"]]
    assert items == [(t3.pk, rnd.pk, "todo"), (t2.pk, None, "draft"), (trace.pk, None, "todo")]
    assert r.json()["results"][0]["url"].endswith(f"/label/?round={rnd.pk}")


def test_queue_filters_by_status_and_pages(project, trace, annotator):
    for i in range(3):
        make_trace(project, title=f"more{i}")
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    assert [i["trace"] for i in c.get("/api/queue/?status=draft").json()["results"]] == [trace.pk]
    page = c.get("/api/queue/?page=1").json()
    assert page["count"] == 4


def test_queue_query_count_does_not_grow_with_items(project, annotator, django_assert_num_queries):
    traces = [make_trace(project, title=f"q{i}") for i in range(6)]
    make_round(project, traces=traces[:3], annotators=[annotator])
    c = client_for(annotator)
    # session/auth is forced; count, round items, trace items (+ their counts).
    with django_assert_num_queries(4):
        r = c.get("/api/queue/")
    assert r.json()["count"] == 6


def test_queue_page_shows_progress_counts(client, project, trace, annotator):
    client.force_login(annotator)
    r = client.get(reverse("annotations:queue"))
    assert r.status_code == 200
    assert b"Outside rounds" in r.content and b"0</b> / 1 submitted" in r.content


def test_queue_next_redirects_to_the_next_trace(client, project, trace, annotator):
    t2 = make_trace(project, title="t2")
    client.force_login(annotator)
    r = client.get(reverse("annotations:queue_next") + f"?after={trace.pk}")
    assert r.status_code == 302
    assert r["Location"] == reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": t2.pk})


# ------------------------------------------------------------------ the page


def test_workspace_page_renders_for_an_annotator(client, trace, annotator):
    client.force_login(annotator)
    r = client.get(reverse("annotations:workspace", kwargs={"slug": trace.project.slug, "pk": trace.pk}))
    assert r.status_code == 200
    assert r.content.count(b'class="ws-mode"') == 14
    assert b"ws-config" in r.content


def test_workspace_page_is_forbidden_to_viewers_and_hidden_from_outsiders(client, trace, viewer, outsider):
    path = reverse("annotations:workspace", kwargs={"slug": trace.project.slug, "pk": trace.pk})
    client.force_login(viewer)
    assert client.get(path).status_code == 403
    client.force_login(outsider)
    assert client.get(path).status_code == 404


def test_trace_content_is_escaped_on_the_workspace_page(client, project, annotator):
    evil = make_trace(project, title="<script>alert(1)</script>", n_steps=1)
    client.force_login(annotator)
    r = client.get(reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": evil.pk}))
    assert b"<script>alert(1)</script>" not in r.content


def test_schema_documents_the_workspace_endpoints(client, annotator):
    client.force_login(annotator)
    r = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    paths = r.json()["paths"] if r["Content-Type"].startswith("application/json") else None
    if paths is None:
        import yaml

        paths = yaml.safe_load(r.content)["paths"]
    for p in (
        "/api/queue/",
        "/api/projects/{slug}/traces/{id}/annotation/",
        "/api/projects/{slug}/traces/{id}/annotation/submit/",
        "/api/projects/{slug}/traces/{id}/annotation/history/",
        "/api/projects/{slug}/traces/{id}/annotations/",
        "/api/projects/{slug}/open-codes/",
    ):
        assert p.replace("{id}", "{pk}") in paths or p in paths, p


def test_annotation_events_are_only_written_for_accepted_changes(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), body(0), format="json")
    c.put(url(trace), body(1), format="json")
    c.put(url(trace), body(0, notes="stale"), format="json")
    c.put(url(trace), body(1, [{"code": "x"}]), format="json")
    assert AnnotationEvent.objects.count() == 1


def test_trace_of_an_open_round_is_not_labelled_beside_the_round(project, trace, annotator, annotator2):
    make_round(project, traces=[trace], annotators=[annotator2])
    before = db_state()
    r = client_for(annotator).put(url(trace), body(0), format="json")
    assert r.status_code == 403 and "labelled inside that round" in r.json()["detail"]
    assert db_state() == before


def test_workspace_sends_my_round_work_into_the_round(client, project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    client.force_login(annotator)
    r = client.get(reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": trace.pk}))
    assert r.status_code == 302 and r["Location"].endswith(f"?round={rnd.pk}")


def test_queue_page_query_count_is_fixed(client, project, annotator, django_assert_num_queries):
    traces = [make_trace(project, title=f"p{i}") for i in range(5)]
    make_round(project, traces=traces[:2], annotators=[annotator])
    client.force_login(annotator)
    client.get(reverse("annotations:queue"))
    with django_assert_num_queries(8):
        r = client.get(reverse("annotations:queue"))
    assert r.status_code == 200


def test_open_codes_query_count_is_fixed(project, trace, annotator, django_assert_num_queries):
    c = client_for(annotator)
    c.put(url(trace), body(0, open_codes=[f"code {i}" for i in range(8)]), format="json")
    with django_assert_num_queries(3):
        r = c.get(f"/api/projects/{project.slug}/open-codes/")
    assert r.json()["count"] == 8


def test_workspace_of_a_closed_round_is_read_only(client, project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator], state="closed")
    client.force_login(annotator)
    r = client.get(reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": trace.pk}) + f"?round={rnd.pk}")
    assert r.status_code == 200
    assert b"can be read, not changed" in r.content


def test_an_autosave_costs_a_fixed_number_of_queries(trace, annotator, django_assert_num_queries):
    c = client_for(annotator)
    labels = [{"code": "1.1", "decision": "present", "evidence": [{"step": 2}], "rationale": "a"}]
    c.put(url(trace), body(0, labels, open_codes=["loop"]), format="json")
    labels[0]["rationale"] = "a longer reason"
    # project + membership + trace in one; BEGIN, lock (+ rater, round, attribution) with labels and
    # codes (one round trip); label upsert + annotation UPDATE + history INSERT (one), COMMIT.
    # Evidence already stored is not looked up again. tests/annotations/labels/test_lean_save.py pins
    # the same save with token authentication, as it arrives in production.
    with django_assert_num_queries(5):
        r = c.put(url(trace), body(1, labels, open_codes=["loop"]), format="json")
    assert r.json()["revision"] == 2
