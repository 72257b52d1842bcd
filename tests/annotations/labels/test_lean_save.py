"""The autosave's plain-SQL path (annotations.labels.sql): same rules, fewer statements.

Each test saves through the API as the labelling screen does and checks what is stored, so the
path is held to the behaviour of the ORM path it replaced, and the query counts are pinned.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotations.labels.selectors import annotation_snapshot
from annotations.models import Annotation, AnnotationEvent, ModeLabel, RoundAnnotator, RoundTrace
from tests.annotations.workspace_factories import client_for, make_round, make_trace, url

pytestmark = pytest.mark.django_db
# The pinned counts count round trips: several statements go in one query.


@pytest.fixture
def trace(project):
    return make_trace(project, n_steps=6, lines_per_step=3, title="lean")


def token_client(user):
    """A client as the screen's saves arrive in production: every request authenticated afresh."""
    from rest_framework.authtoken.models import Token

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return c


def session_client(user):
    """A client signed in with a session cookie, as the labelling screen's saves arrive."""
    c = APIClient()
    c.force_login(user)
    return c


def state(revision, labels, **kw):
    return {"revision": revision, "labels": labels, "task_success": "no", "notes": "", "open_codes": [], **kw}


def lab(code, decision="present", evidence=(), rationale=""):
    return {"code": code, "decision": decision, "evidence": list(evidence), "rationale": rationale}


def stored_labels(annotation_id):
    rows = ModeLabel.objects.filter(annotation_id=annotation_id).select_related("mode")
    return sorted((r.mode.code, r.decision, r.evidence, r.rationale) for r in rows)


def test_a_save_writes_only_the_labels_that_changed_and_deletes_the_dropped_ones(trace, annotator):
    c = client_for(annotator)
    first = [lab("1.1", rationale="a"), lab("1.2", "absent"), lab("2.1", evidence=[{"step": 1}])]
    r = c.put(url(trace), state(0, first), format="json")
    ann_id = r.json()["id"]
    ids = dict(ModeLabel.objects.filter(annotation_id=ann_id).values_list("mode__code", "id"))
    second = [lab("1.1", rationale="b"), lab("2.1", evidence=[{"step": 1}]), lab("3.1", "unsure")]
    r = c.put(url(trace), state(1, second), format="json")
    assert r.status_code == 200 and r.json()["revision"] == 2
    assert stored_labels(ann_id) == [
        ("1.1", "present", [], "b"),
        ("2.1", "present", [{"step": 1}], ""),
        ("3.1", "unsure", [], ""),
    ]
    now = dict(ModeLabel.objects.filter(annotation_id=ann_id).values_list("mode__code", "id"))
    assert now["1.1"] == ids["1.1"] and now["2.1"] == ids["2.1"]  # updated in place, not re-created
    assert r.json()["labels"] == annotation_snapshot(annotation=Annotation.objects.get(pk=ann_id))["labels"]


def test_the_history_event_holds_the_state_before_and_after(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), state(0, [lab("1.1")], open_codes=["loops"]), format="json")
    c.put(url(trace), state(1, [lab("1.1", "absent")], notes="changed my mind", open_codes=["loops"]), format="json")
    event = AnnotationEvent.objects.get(revision=2)
    assert (event.action, event.by_id) == ("save", annotator.pk)
    assert event.before["labels"][0]["decision"] == "present" and event.before["open_codes"] == ["loops"]
    assert event.after["labels"][0]["decision"] == "absent" and event.after["notes"] == "changed my mind"
    assert event.after == {**annotation_snapshot(annotation=Annotation.objects.get()), "attribution": None}


@pytest.mark.parametrize("how", ["session", "token"])
@pytest.mark.parametrize("in_round", [False, True], ids=["outside-rounds", "in-a-round"])
def test_a_save_that_changes_a_submitted_annotation_is_refused_on_every_path(project, trace, annotator, how, in_round):
    rnd = make_round(project, traces=[trace], annotators=[annotator]) if in_round else None
    q = f"?round={rnd.pk}" if rnd else ""
    c = session_client(annotator) if how == "session" else token_client(annotator)
    codes = [m.code for m in project.taxonomy_version.modes.all()]
    full = [lab(code, "absent") for code in codes]
    assert c.put(url(trace) + q, state(0, full), format="json").status_code == 200
    assert c.post(url(trace, "submit/") + q, {"revision": 1}, format="json").status_code == 200
    stored = (stored_labels(Annotation.objects.get().pk), AnnotationEvent.objects.count())
    for change in (
        state(2, [lab(codes[0], "absent", rationale="stray keystrokes"), *full[1:]]),  # the rationale
        state(2, full, task_success="yes"),  # "task succeeded" flipped
        state(2, full[1:]),  # incomplete: no longer reopens it silently
    ):
        r = c.put(url(trace) + q, change, format="json")
        assert r.status_code == 409, r.content
        assert "submitted, so it is read-only" in r.json()["detail"] and "Reopen" in r.json()["detail"]
    ann = Annotation.objects.get()
    assert (ann.state, ann.revision, ann.task_success) == ("submitted", 2, "no")
    assert (stored_labels(ann.pk), AnnotationEvent.objects.count()) == stored
    # the same state again (a retried autosave) is still harmless
    assert c.put(url(trace) + q, state(2, full), format="json").status_code == 200


def test_reopen_makes_it_editable_records_it_and_counts_it_as_not_submitted(project, trace, annotator):
    from annotations.rounds.selectors import round_progress

    rnd = make_round(project, traces=[trace], annotators=[annotator])
    q = f"?round={rnd.pk}"
    c = client_for(annotator)
    full = [lab(m.code, "absent") for m in project.taxonomy_version.modes.all()]
    c.put(url(trace) + q, state(0, full), format="json")
    c.post(url(trace, "submit/") + q, {"revision": 1}, format="json")
    assert round_progress(round=rnd).submitted == 1
    r = c.post(url(trace, "reopen/") + q, {"revision": 2}, format="json")
    assert (r.status_code, r.json()["state"], r.json()["revision"], r.json()["submitted_at"]) == (200, "draft", 3, None)
    assert round_progress(round=rnd).submitted == 0
    assert c.put(url(trace) + q, state(3, full, task_success="yes"), format="json").status_code == 200
    assert c.post(url(trace, "submit/") + q, {"revision": 4}, format="json").json()["state"] == "submitted"
    assert round_progress(round=rnd).submitted == 1
    history = c.get(url(trace, "history/") + q).json()
    events = history["results"] if isinstance(history, dict) else history
    assert [e["action"] for e in events] == ["save", "submit", "reopen", "save", "submit"]


def test_reopen_is_refused_once_the_round_is_in_review(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    q = f"?round={rnd.pk}"
    c = client_for(annotator)
    full = [lab(m.code, "absent") for m in project.taxonomy_version.modes.all()]
    c.put(url(trace) + q, state(0, full), format="json")
    c.post(url(trace, "submit/") + q, {"revision": 1}, format="json")
    rnd.state = "review"
    rnd.save()
    r = c.post(url(trace, "reopen/") + q, {"revision": 2}, format="json")
    assert r.status_code == 403 and "is in review" in r.json()["detail"]
    assert Annotation.objects.get().state == "submitted"


def test_an_identical_repeat_changes_nothing_even_on_a_stale_revision(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), state(0, [lab("1.1")]), format="json")
    c.put(url(trace), state(1, [lab("1.1", rationale="x")]), format="json")
    updated = Annotation.objects.get().updated_at
    r = c.put(url(trace), state(1, [lab("1.1", rationale="x")]), format="json")  # a retried request
    assert (r.status_code, r.json()["revision"]) == (200, 2)
    assert Annotation.objects.get().updated_at == updated
    assert AnnotationEvent.objects.count() == 2


def test_attribution_is_saved_read_back_and_removed(trace, annotator):
    c = client_for(annotator)
    attribution = {"step": 2, "no_single_step": False, "agent": "Planner", "modes": ["1.1"], "reason": "r"}
    r = c.put(url(trace), state(0, [lab("1.1")], attribution=attribution), format="json")
    assert r.json()["attribution"]["step"] == 2
    # the stored attribution is read with the lock: the same state again is an unchanged repeat
    r = c.put(url(trace), state(1, [lab("1.1")], attribution=attribution), format="json")
    assert r.json()["revision"] == 1
    r = c.put(url(trace), state(1, [lab("1.1")], attribution=None), format="json")
    assert (r.json()["revision"], r.json()["attribution"]) == (2, None)


def test_a_round_closed_after_the_page_was_opened_refuses_the_save(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    c = client_for(annotator)
    assert c.put(url(trace, round=rnd), state(0, [lab("1.1")]), format="json").status_code == 200
    rnd.state = "closed"
    rnd.save()
    r = c.put(url(trace, round=rnd), state(1, [lab("1.1", "absent")]), format="json")
    assert r.status_code == 403 and "closed" in r.json()["detail"]
    assert Annotation.objects.get().revision == 1


def test_an_annotator_taken_off_the_round_can_no_longer_save_in_it(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    c = client_for(annotator)
    c.put(url(trace, round=rnd), state(0, [lab("1.1")]), format="json")
    ann = Annotation.objects.get()
    RoundAnnotator.objects.filter(round=rnd, user=annotator).delete()
    r = c.put(url(trace, round=rnd), state(1, [lab("1.1", "absent")]), format="json")
    assert r.status_code == 404  # the round is no longer one of hers
    # the service's own check, with the round still passed in (as when the view resolved it first)
    from annotations.labels.services import AnnotationForbidden, annotation_upsert

    with pytest.raises(AnnotationForbidden, match="not an annotator"):
        annotation_upsert(
            trace=trace,
            user=annotator,
            taxonomy_version=rnd.taxonomy_version,
            round=rnd,
            base_revision=1,
            labels=[lab("1.1", "absent")],
        )
    assert Annotation.objects.get().revision == ann.revision == 1


def test_a_trace_taken_out_of_the_round_can_no_longer_be_saved_in_it(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    c = client_for(annotator)
    c.put(url(trace, round=rnd), state(0, [lab("1.1")]), format="json")
    RoundTrace.objects.filter(round=rnd, trace=trace).delete()
    r = c.put(url(trace, round=rnd), state(1, [lab("1.1", "absent")]), format="json")
    assert r.status_code == 400 and "not part of round" in r.json()["detail"]
    assert Annotation.objects.get().revision == 1


@pytest.mark.parametrize(
    ("body_change", "status", "stored_code"),
    [
        ({"code": " 1.1 "}, 200, "1.1"),  # DRF trims codes: the plain path leaves such bodies to DRF
        ({"code": 11}, 400, None),  # a number becomes "11": an unknown mode, named as such
        ({"rationale": "bad \x00 byte"}, 400, None),  # DRF refuses NUL characters
        ({"decision": None}, 400, None),
    ],
)
def test_bodies_off_the_plain_shape_get_drfs_answer(trace, annotator, body_change, status, stored_code):
    body = state(0, [{**lab("1.1"), **body_change}])
    r = client_for(annotator).put(url(trace), body, format="json")
    assert r.status_code == status, r.json()
    assert [code for code, *_ in stored_labels(r.json().get("id"))] == ([stored_code] if stored_code else [])


def test_a_string_revision_is_read_as_drf_reads_it(trace, annotator):
    c = client_for(annotator)
    c.put(url(trace), state(0, [lab("1.1")]), format="json")
    r = c.put(url(trace), state("1", [lab("1.1", "absent")]), format="json")
    assert (r.status_code, r.json()["revision"]) == (200, 2)


def test_a_changed_save_costs_five_queries(trace, annotator, django_assert_num_queries):
    c = token_client(annotator)
    labels = [lab("1.1", evidence=[{"step": 2}], rationale="a")]
    c.put(url(trace), state(0, labels, open_codes=["loop"]), format="json")
    labels[0]["rationale"] = "a longer reason"
    # the token, its user, the project + my membership + the trace in one; BEGIN; the lock (+ rater,
    # round, attribution) sent with the read of its labels and open codes; the changed label's
    # upsert, the annotation's UPDATE and the history INSERT sent together; COMMIT. Stored evidence
    # is not looked up again. (The ORM path made 13; one statement per round trip made 9.)
    with django_assert_num_queries(5) as ctx:
        r = c.put(url(trace), state(1, labels, open_codes=["loop"]), format="json")
    assert r.json()["revision"] == 2
    writes = [q["sql"] for q in ctx.captured_queries if "INSERT INTO annotations_annotationevent" in q["sql"]]
    assert len(writes) == 1 and writes[0].lstrip().startswith("INSERT INTO annotations_modelabel")
    assert "UPDATE annotations_annotation SET" in writes[0]
    stored = annotation_snapshot(annotation=Annotation.objects.get())
    assert stored["labels"] == [lab("1.1", evidence=[{"step": 2}], rationale="a longer reason")]
    assert list(AnnotationEvent.objects.values_list("revision", flat=True).order_by("revision")) == [1, 2]


def test_an_identical_repeat_costs_four_queries_and_writes_nothing(trace, annotator, django_assert_num_queries):
    c = token_client(annotator)
    labels = [lab("1.1", evidence=[{"step": 2}], rationale="a")]
    c.put(url(trace), state(0, labels, open_codes=["loop"]), format="json")
    # token + user + project + membership + trace; BEGIN, the lock with its labels and open codes; COMMIT
    with django_assert_num_queries(4) as ctx:
        r = c.put(url(trace), state(1, labels, open_codes=["loop"]), format="json")
    assert r.json()["revision"] == 1
    assert not any(q["sql"].lstrip().startswith(("INSERT", "UPDATE", "DELETE")) for q in ctx.captured_queries)


def test_a_token_save_is_refused_as_before_for_bad_tokens_strangers_and_missing_traces(
    project, trace, annotator, viewer
):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    def put(key, where=None):
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return c.put(where or url(trace), state(0, [lab("1.1")]), format="json")

    wrong = put("0" * 40)
    assert (wrong.status_code, wrong.json()["detail"], wrong["WWW-Authenticate"]) == (401, "Invalid token.", "Token")
    stranger = get_user_model().objects.create_user("stranger")
    assert put(Token.objects.create(user=stranger).key).status_code == 404  # not a member
    assert put(Token.objects.create(user=viewer).key).status_code == 403  # a viewer does not label
    key = Token.objects.create(user=annotator).key
    assert put(key, f"/api/projects/{project.slug}/traces/{2**63}/annotation/").status_code == 404
    assert put(key, f"/api/projects/no-such/traces/{trace.pk}/annotation/").status_code == 404
    ok = put(key)
    assert (ok.status_code, ok.json()["revision"]) == (200, 1)
    annotator.is_active = False
    annotator.save()
    gone = put(key)
    assert (gone.status_code, gone.json()["detail"]) == (401, "User inactive or deleted.")
    assert Annotation.objects.get().revision == 1


def test_changed_open_codes_are_written_with_the_save_in_one_round_trip(
    project, trace, annotator, django_assert_num_queries
):
    from annotations.models import OpenCode

    other_trace = make_trace(project, n_steps=2, title="other")
    c = token_client(annotator)
    c.put(url(other_trace), state(0, [], open_codes=["shared", "kept"]), format="json")
    c.put(url(trace), state(0, [lab("1.1")], open_codes=["kept", "dropped"]), format="json")
    # one code reused from another annotation, one new, one dropped, one kept
    with django_assert_num_queries(5):
        r = c.put(url(trace), state(1, [lab("1.1")], open_codes=["new one", "shared", "kept"]), format="json")
    assert (r.status_code, r.json()["revision"], r.json()["open_codes"]) == (200, 2, ["kept", "new one", "shared"])
    mine = Annotation.objects.get(trace=trace)
    assert sorted(mine.open_codes.values_list("name", flat=True)) == ["kept", "new one", "shared"]
    assert sorted(OpenCode.objects.filter(project=project).values_list("name", flat=True)) == [
        "dropped",  # the codebook keeps a code no annotation uses any more
        "kept",
        "new one",
        "shared",
    ]
    theirs = Annotation.objects.get(trace=other_trace)
    assert sorted(theirs.open_codes.values_list("name", flat=True)) == ["kept", "shared"]
    assert AnnotationEvent.objects.get(annotation=mine, revision=2).after["open_codes"] == ["kept", "new one", "shared"]
    r = c.put(url(trace), state(2, [lab("1.1")], open_codes=[]), format="json")
    assert (r.json()["revision"], list(mine.open_codes.all())) == (3, [])
    assert sorted(theirs.open_codes.values_list("name", flat=True)) == ["kept", "shared"]


@pytest.mark.parametrize("index", [99, -1, 2**63, 10**30])
def test_evidence_on_a_step_the_trace_does_not_have_is_refused_by_name(trace, annotator, index):
    c = token_client(annotator)
    r = c.put(url(trace), state(0, [lab("1.1", evidence=[{"step": 1}, {"step": index}])]), format="json")
    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == [
        {
            "field": "labels[0].evidence[1]",
            "message": f"step {index} does not exist in this trace (it has {trace.n_steps} steps).",
        }
    ]
    assert not Annotation.objects.filter(revision__gt=0).exists()
    ok = c.put(url(trace), state(0, [lab("1.1", evidence=[{"step": 1}, {"step": 5}])]), format="json")
    assert (ok.status_code, ok.json()["labels"][0]["evidence"]) == (200, [{"step": 1}, {"step": 5}])


def test_the_save_checks_lines_against_the_traces_lines_and_steps_against_its_steps(trace, annotator):
    # 6 steps of 3 lines: the trace the save reads must not swap the two counts
    assert (trace.n_steps, trace.n_lines) == (6, 18)
    c = token_client(annotator)
    r = c.put(url(trace), state(0, [lab("1.1", evidence=[{"lines": [10, 18]}, {"step": 5}])]), format="json")
    assert (r.status_code, r.json()["labels"][0]["evidence"]) == (200, [{"lines": [10, 18]}, {"step": 5}])
    r = c.put(url(trace), state(1, [lab("1.1", evidence=[{"lines": [10, 19]}])]), format="json")
    assert r.json()["errors"][0]["message"] == "lines 10-19 are outside the trace (lines 1-18)."
