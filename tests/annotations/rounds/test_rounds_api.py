"""Rounds API: create and move rounds, assignments, disagreements, adjudications, comments,
the agreement JSON, agreed labels; permissions per role; pinned query counts; the command."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from annotations.models import Round
from tests.annotations.rounds_factories import make_open_round, make_review_round, make_traces


def api(user) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


@pytest.fixture
def traces(project):
    return make_traces(project, 3)


@pytest.fixture
def open_round(project, manager, annotator, annotator2, traces):
    from tests.annotations.rounds_factories import label_via_workspace

    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    label_via_workspace(round=rnd, user=annotator, trace=traces[0], present={"1.3"})
    return rnd


@pytest.fixture
def review_round(project, manager, annotator, annotator2, traces):
    return make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
    )


def test_manager_creates_a_round(project, manager, annotator, annotator2, traces):
    r = api(manager).post(
        "/api/projects/demo/rounds/",
        {
            "name": "API round",
            "taxonomy_version": project.taxonomy_version_id,
            "annotators": ["ann1", "ann2"],
            "method": "stratified",
            "n": 3,
            "seed": 9,
            "stratify_by": "benchmark",
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["state"] == "draft" and r.json()["n_traces"] == 3 and r.json()["n_annotators"] == 2


def test_a_round_created_through_the_api_says_what_it_measures(project, manager, annotator, annotator2, traces):
    body = {"taxonomy_version": project.taxonomy_version_id, "annotators": ["ann1", "ann2"], "n": 2}
    made = api(manager).post("/api/projects/demo/rounds/", {**body, "name": "A", "kind": "attribution"}, format="json")
    assert made.status_code == 201 and made.json()["kind"] == "attribution"
    assert Round.objects.get(pk=made.json()["id"]).kind == Round.Kind.ATTRIBUTION
    default = api(manager).post("/api/projects/demo/rounds/", {**body, "name": "M"}, format="json")
    assert default.json()["kind"] == "modes"
    bad = api(manager).post("/api/projects/demo/rounds/", {**body, "name": "B", "kind": "vibes"}, format="json")
    assert bad.status_code == 400 and "kind" in bad.content.decode()


def test_sample_preview_api_matches_the_created_round(project, manager, annotator, annotator2, traces):
    body = {"method": "stratified", "n": 3, "seed": 5, "stratify_by": "framework"}
    preview = api(manager).post("/api/projects/demo/rounds/preview/", body, format="json").json()
    created = (
        api(manager)
        .post(
            "/api/projects/demo/rounds/",
            {**body, "name": "P", "taxonomy_version": project.taxonomy_version_id, "annotators": ["ann1", "ann2"]},
            format="json",
        )
        .json()
    )
    ids = list(Round.objects.get(pk=created["id"]).round_traces.order_by("order").values_list("trace_id", flat=True))
    assert [t["id"] for t in preview["traces"]] == ids and preview["sampling"]["method"] == "stratified"


def test_create_names_the_bad_annotator(project, manager, annotator, viewer, traces):
    r = api(manager).post(
        "/api/projects/demo/rounds/",
        {
            "name": "X",
            "taxonomy_version": project.taxonomy_version_id,
            "annotators": ["ann1", "viewer"],
            "method": "random",
            "n": 1,
        },
        format="json",
    )
    assert r.status_code == 400 and "Not annotators of Demo project: viewer" in r.json()["detail"]


def test_annotator_cannot_create_rounds(project, annotator, annotator2, traces):
    r = api(annotator).post(
        "/api/projects/demo/rounds/",
        {"name": "X", "taxonomy_version": project.taxonomy_version_id, "annotators": ["ann1", "ann2"], "n": 1},
        format="json",
    )
    assert r.status_code == 403


def test_round_list_is_paginated_and_query_count_pinned(review_round, viewer, django_assert_num_queries):
    c = api(viewer)
    with django_assert_num_queries(4):  # project, membership, count, page
        r = c.get("/api/projects/demo/rounds/")
    assert r.json()["count"] == 1 and r.json()["results"][0]["name"] == "Round A"
    assert r.json()["results"][0]["headline_kappa"] is not None


def test_transition_refuses_skipping_with_a_clear_message(open_round, manager):
    r = api(manager).post(f"/api/rounds/{open_round.pk}/transition/", {"to": "closed"}, format="json")
    assert r.status_code == 400 and "rounds go draft -> open -> review -> closed" in r.json()["detail"]


def test_transition_moves_the_round(open_round, manager):
    r = api(manager).post(f"/api/rounds/{open_round.pk}/transition/", {"to": "review", "force": True}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "review"


def test_annotator_cannot_move_rounds(open_round, annotator):
    r = api(annotator).post(f"/api/rounds/{open_round.pk}/transition/", {"to": "review"}, format="json")
    assert r.status_code == 403


def test_annotator_sees_only_own_assignments_while_open(open_round, annotator):
    rows = api(annotator).get(f"/api/rounds/{open_round.pk}/assignments/").json()["results"]
    assert {r["annotator"] for r in rows} == {"ann1"} and sorted(r["state"] for r in rows) == [
        "submitted",
        "todo",
        "todo",
    ]


def test_manager_sees_every_assignment(open_round, manager):
    rows = api(manager).get(f"/api/rounds/{open_round.pk}/assignments/").json()["results"]
    assert len(rows) == 6 and {r["annotator"] for r in rows} == {"ann1", "ann2"}


@pytest.mark.parametrize("endpoint", ["agreement", "disagreements", "adjudications", "comments"])
def test_annotator_gets_403_on_labels_while_open(open_round, annotator2, endpoint):
    assert api(annotator2).get(f"/api/rounds/{open_round.pk}/{endpoint}/").status_code == 403


def test_outsider_gets_404(open_round, outsider):
    assert api(outsider).get(f"/api/rounds/{open_round.pk}/").status_code == 404


def test_annotator_reads_disagreements_after_review(review_round, annotator2, traces):
    r = api(annotator2).get(f"/api/rounds/{review_round.pk}/disagreements/")
    (item,) = r.json()["results"]
    assert (item["trace_id"], item["mode"]) == (traces[0].pk, "1.3")
    assert [(x["username"], x["decision"]) for x in item["labels"]] == [("ann1", "present"), ("ann2", "absent")]


def test_manager_records_an_adjudication(review_round, manager, traces):
    r = api(manager).post(
        f"/api/rounds/{review_round.pk}/adjudications/",
        {"trace_id": traces[0].pk, "mode": "1.3", "decision": "absent", "note": "weak"},
        format="json",
    )
    assert r.status_code == 200 and r.json()["basis"] == "adjudicated" and r.json()["by"] == "manager"
    listed = api(manager).get(f"/api/rounds/{review_round.pk}/adjudications/?page=1").json()
    assert listed["count"] == 42


def test_annotator_cannot_adjudicate_via_api(review_round, annotator, traces):
    r = api(annotator).post(
        f"/api/rounds/{review_round.pk}/adjudications/",
        {"trace_id": traces[0].pk, "mode": "1.3", "decision": "absent"},
        format="json",
    )
    assert r.status_code == 403


def test_comment_via_api(review_round, annotator, traces):
    r = api(annotator).post(
        f"/api/rounds/{review_round.pk}/comments/",
        {"trace_id": traces[0].pk, "mode": "1.3", "body": "why?"},
        format="json",
    )
    assert r.status_code == 201 and r.json()["author"] == "ann1"


def test_agreement_json_names_the_round(review_round, manager):
    data = api(manager).get(f"/api/rounds/{review_round.pk}/agreement/").json()
    assert data["round"] == {
        "id": review_round.pk,
        "name": "Round A",
        "state": "review",
        "taxonomy_version": review_round.taxonomy_version.label,
    }
    assert data["raters"] == ["ann1", "ann2"] and data["rater_set"] == "humans"
    assert len(data["per_mode"]) == 14 and data["bootstrap"]["n_boot"] == 1000


def test_agreement_rejects_an_unknown_rater_set(review_round, manager):
    r = api(manager).get(f"/api/rounds/{review_round.pk}/agreement/?raters=robots")
    assert r.status_code == 400 and "Unknown rater set" in r.json()["detail"]


def test_agreed_labels_api_lists_closed_consensus(project, manager, annotator, annotator2, traces, viewer):
    from annotations.rounds.services import round_close

    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    round_close(round=rnd, by=manager)
    data = api(viewer).get("/api/projects/demo/agreed-labels/").json()
    assert data["count"] == 42 and data["results"][0]["basis"] == "unanimous"


def test_agreed_labels_api_withholds_traces_being_labelled_blind_again(
    project, manager, annotator, annotator2, traces, viewer
):
    """A follow-up round on a closed round's traces: its raters must not read the earlier
    consensus of those traces through the API while they label them (nor may anyone else)."""
    from annotations.rounds.services import round_close

    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    round_close(round=rnd, by=manager)
    make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:1], name="Round B")
    for user in (annotator, viewer):
        for query in ("", f"?taxonomy_version={rnd.taxonomy_version_id}"):
            data = api(user).get(f"/api/projects/demo/agreed-labels/{query}").json()
            assert data["withheld"] == 1, (user, query)
            assert traces[0].pk not in {row["trace_id"] for row in data["results"]}, (user, query)
            assert data["count"] == 28, (user, query)
    data = api(manager).get("/api/projects/demo/agreed-labels/").json()  # not labelling in Round B
    assert data["withheld"] == 0 and data["count"] == 42


def test_round_report_command_prints_every_round(review_round, project, manager, annotator, annotator2, traces, capsys):
    make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces, name="Round B")
    call_command("round_report", "--project", "demo", "--json")
    out = json.loads(capsys.readouterr().out)
    assert [(r["round"]["name"], r["round"]["state"]) for r in out] == [("Round A", "review"), ("Round B", "open")]
    assert out[0]["mean_pairwise_kappa"]["value"] is not None


def test_round_report_command_one_round(review_round, capsys):
    call_command("round_report", "--project", "demo", "--round", str(review_round.pk), "--json")
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 1 and out[0]["round"]["id"] == review_round.pk


def test_round_report_command_unknown_round_fails_clearly(review_round):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No round 999999 in project demo"):
        call_command("round_report", "--project", "demo", "--round", "999999", "--json")


def test_schema_documents_the_rounds_api(db):
    from django.test import Client

    schema = Client().get("/api/schema/?format=json")
    if schema.status_code in (401, 403):
        pytest.fail("schema endpoint not public")
    paths = json.loads(schema.content)["paths"]
    for p in (
        "/api/rounds/{id}/agreement/",
        "/api/rounds/{id}/disagreements/",
        "/api/rounds/{id}/adjudications/",
        "/api/rounds/{id}/assignments/",
        "/api/projects/{slug}/rounds/",
    ):
        assert p in paths, p
    assert Round  # imported for clarity of the tested area
