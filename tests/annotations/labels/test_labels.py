"""annotation services: get-or-create, save with optimistic concurrency, submit, history, open codes."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotations.labels.selectors import annotation_snapshot, open_code_list, queue_counts, queue_next
from annotations.labels.services import (
    AnnotationConflict,
    AnnotationForbidden,
    AnnotationInvalid,
    AnnotationLocked,
    AnnotationSubmittedReadOnly,
    annotation_get_or_create,
    annotation_reopen,
    annotation_save,
    annotation_submit,
    rater_for_user,
)
from annotations.models import Annotation, AnnotationEvent, ModeLabel, Rater
from taxonomy.services import version_draft_from
from tests.annotations.workspace_factories import all_labels, db_state, make_round, make_trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace(project):
    return make_trace(project, n_steps=6, lines_per_step=3)


@pytest.fixture
def ann(trace, annotator):
    return annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=trace.project.taxonomy_version)


def save(ann, user, base, labels, **kw):
    return annotation_save(
        annotation=ann,
        by=user,
        base_revision=base,
        labels=labels,
        task_success=kw.get("task_success", "unknown"),
        notes=kw.get("notes", ""),
        open_codes=kw.get("open_codes", []),
    )


def one(code="1.1", decision="present", evidence=None, rationale=""):
    return {"code": code, "decision": decision, "evidence": evidence or [], "rationale": rationale}


# ------------------------------------------------------------------ raters and get-or-create


def test_rater_for_user_is_created_once_with_the_username(annotator):
    first = rater_for_user(user=annotator)
    assert rater_for_user(user=annotator) == first
    assert (first.kind, first.name, first.user) == ("human", "ann1", annotator)


def test_rater_for_user_avoids_a_name_taken_by_a_judge(annotator):
    Rater.objects.create(kind="llm", name="ann1")
    assert rater_for_user(user=annotator).name == f"ann1 (user {annotator.pk})"


def test_get_or_create_returns_the_same_annotation(trace, annotator, ann):
    again = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=trace.project.taxonomy_version)
    assert again.pk == ann.pk
    assert Annotation.objects.count() == 1


def test_viewer_cannot_start_an_annotation(trace, viewer):
    with pytest.raises(AnnotationForbidden):
        annotation_get_or_create(trace=trace, user=viewer, taxonomy_version=trace.project.taxonomy_version)


def test_database_refuses_a_second_annotation_for_the_same_trace_rater_version(ann):
    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(trace=ann.trace, rater=ann.rater, taxonomy_version=ann.taxonomy_version)


def test_database_refuses_a_second_annotation_in_the_same_round(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    first = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd)
    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(trace=trace, rater=first.rater, taxonomy_version=project.taxonomy_version, round=rnd)


def test_round_annotation_is_separate_from_the_outside_one(project, trace, annotator, ann):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    in_round = annotation_get_or_create(
        trace=trace, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd
    )
    assert in_round.pk != ann.pk and in_round.round == rnd


def test_non_member_of_round_cannot_label_in_it(project, trace, annotator, annotator2):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    with pytest.raises(AnnotationForbidden):
        annotation_get_or_create(trace=trace, user=annotator2, taxonomy_version=project.taxonomy_version, round=rnd)


# ------------------------------------------------------------------ saving


def test_save_stores_labels_and_bumps_revision(ann, annotator):
    saved = save(ann, annotator, 0, [one("1.1", evidence=[{"step": 2}], rationale="ignores the spec")], notes="n")
    assert saved.revision == 1
    label = ModeLabel.objects.get(annotation=ann)
    assert (label.mode.code, label.decision, label.evidence, label.rationale) == (
        "1.1",
        "present",
        [{"step": 2}],
        "ignores the spec",
    )


def test_save_replaces_the_whole_state(ann, annotator):
    save(ann, annotator, 0, [one("1.1"), one("1.2", "absent")])
    save(ann, annotator, 1, [one("1.2", "present")])
    assert list(ModeLabel.objects.filter(annotation=ann).values_list("mode__code", "decision")) == [("1.2", "present")]


def test_identical_save_changes_nothing(ann, annotator):
    labels = [one("1.1", evidence=[{"lines": [1, 3]}])]
    save(ann, annotator, 0, labels, open_codes=["loops"])
    before = db_state()
    again = save(ann, annotator, 1, labels, open_codes=["loops"])
    assert again.revision == 1
    assert db_state() == before


def test_identical_save_on_a_stale_revision_is_accepted_unchanged(ann, annotator):
    labels = [one("1.1")]
    save(ann, annotator, 0, labels)
    # The client never saw the answer to its first save and retries it on revision 0.
    assert save(ann, annotator, 0, labels).revision == 1


def test_stale_save_with_other_content_is_a_conflict_carrying_the_current_state(ann, annotator):
    save(ann, annotator, 0, [one("1.1")])
    before = db_state()
    with pytest.raises(AnnotationConflict) as exc:
        save(ann, annotator, 0, [one("1.2")])
    assert exc.value.current["revision"] == 1
    assert exc.value.current["labels"][0]["code"] == "1.1"
    assert db_state() == before


def test_every_accepted_change_writes_history_with_before_and_after(ann, annotator):
    save(ann, annotator, 0, [one("1.1")])
    save(ann, annotator, 1, [one("1.1", "absent")], notes="second look")
    events = list(AnnotationEvent.objects.filter(annotation=ann).order_by("revision"))
    assert [(e.action, e.revision, e.by) for e in events] == [("save", 1, annotator), ("save", 2, annotator)]
    assert events[1].before["labels"][0]["decision"] == "present"
    assert events[1].after["labels"][0]["decision"] == "absent"
    assert events[1].after["notes"] == "second look"


def test_open_codes_are_one_codebook_counted_as_the_blind_rule_shows_them(project, manager, annotator, annotator2):
    """One code per name across the project; each rater counts her own uses and others' only where
    she may see their labels (issue 27: ann2's labels outside rounds are hidden from ann1)."""
    t1, t2 = make_trace(project, title="a"), make_trace(project, title="b")
    a1 = annotation_get_or_create(trace=t1, user=annotator, taxonomy_version=project.taxonomy_version)
    a2 = annotation_get_or_create(trace=t2, user=annotator2, taxonomy_version=project.taxonomy_version)
    save(a1, annotator, 0, [], open_codes=["endless loop", "wrong tool"])
    save(a2, annotator2, 0, [], open_codes=["endless   loop"])
    codes = [(c.name, c.n_uses) for c in open_code_list(project=project, user=annotator)]
    assert codes == [("endless loop", 1), ("wrong tool", 1)]
    assert [(c.name, c.n_uses) for c in open_code_list(project=project, user=annotator2)] == [("endless loop", 1)]
    codes = [(c.name, c.n_uses) for c in open_code_list(project=project, user=manager)]
    assert codes == [("endless loop", 2), ("wrong tool", 1)]


# ------------------------------------------------------------------ bad input: refused, nothing stored


@pytest.mark.parametrize(
    ("labels", "kw", "fragment"),
    [
        ([one("9.9")], {}, "unknown mode code '9.9'"),
        ([one("1.1", evidence=[{"step": 6}])], {}, "step 6 does not exist"),
        ([one("1.1", evidence=[{"lines": [17, 19]}])], {}, "outside the trace"),
        ([one("1.1", evidence=[{"row": 1}])], {}, "evidence must be"),
        ([one("1.1", decision="maybe")], {}, "decision must be one of"),
        ([one("1.1"), one("1.1")], {}, "listed twice"),
        ([one("1.1", rationale="x" * 2001)], {}, "limit is 2,000"),
        ([], {"notes": "x" * 10_001}, "limit is 10,000"),
        ([], {"open_codes": ["y" * 81]}, "limit is 80"),
        ([], {"open_codes": [f"c{i}" for i in range(51)]}, "at most 50 codes"),
        ([], {"task_success": "maybe"}, "yes, no or unknown"),
    ],
)
def test_bad_input_is_refused_with_a_message_and_nothing_changes(ann, annotator, labels, kw, fragment):
    save(ann, annotator, 0, [one("1.3")], notes="kept")
    before = db_state()
    with pytest.raises(AnnotationInvalid) as exc:
        save(ann, annotator, 1, labels, **kw)
    assert fragment in str(exc.value)
    assert db_state() == before


def test_mode_of_another_taxonomy_version_is_refused_naming_the_code(project, ann, annotator, manager):
    draft = version_draft_from(source=project.taxonomy_version, by=manager)
    from taxonomy.services import mode_add

    mode_add(version=draft, code="3.9", name="New mode", definition="Only in the draft.")
    before = db_state()
    with pytest.raises(AnnotationInvalid) as exc:
        save(ann, annotator, 0, [one("3.9")])
    assert "'3.9'" in str(exc.value) and "MAST v2" in str(exc.value)
    assert db_state() == before


def test_saving_someone_elses_annotation_is_forbidden(ann, annotator2):
    before = db_state()
    with pytest.raises(AnnotationForbidden):
        save(ann, annotator2, 0, [one("1.1")])
    assert db_state() == before


def test_annotator_removed_from_project_can_no_longer_save(project, ann, annotator):
    project.memberships.filter(user=annotator).update(role="viewer")
    annotator._project_roles = {}
    with pytest.raises(AnnotationForbidden):
        save(ann, annotator, 0, [one("1.1")])


def test_saving_after_the_round_closed_is_refused(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd)
    save(ann, annotator, 0, [one("1.1")])
    rnd.state = "closed"
    rnd.save()
    before = db_state()
    with pytest.raises(AnnotationLocked):
        save(ann, annotator, 1, [one("1.2")])
    assert db_state() == before


def test_a_submitted_annotation_cannot_be_changed_or_reopened_in_review(project, trace, annotator):
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd)
    save(ann, annotator, 0, all_labels(project.taxonomy_version))
    annotation_submit(annotation=ann, by=annotator, base_revision=1)
    rnd.state = "review"
    rnd.save()
    labels = all_labels(project.taxonomy_version)
    labels[0]["decision"] = "present"
    before = db_state()
    with pytest.raises(AnnotationSubmittedReadOnly, match="is in review: submitted labels can no longer be reopened"):
        save(ann, annotator, 2, labels)
    with pytest.raises(AnnotationLocked, match="is in review"):
        annotation_reopen(annotation=ann, by=annotator, base_revision=2)
    assert db_state() == before


# ------------------------------------------------------------------ submit


def test_submit_needs_a_decision_for_every_mode(ann, annotator):
    labels = all_labels(ann.taxonomy_version)
    labels[3]["decision"] = "unsure"
    save(ann, annotator, 0, labels[:-1])
    before = db_state()
    with pytest.raises(AnnotationInvalid) as exc:
        annotation_submit(annotation=ann, by=annotator, base_revision=1)
    assert "1.4" in str(exc.value) and "3.3" in str(exc.value)
    assert db_state() == before


def test_submit_is_idempotent(ann, annotator):
    save(ann, annotator, 0, all_labels(ann.taxonomy_version))
    first = annotation_submit(annotation=ann, by=annotator, base_revision=1)
    state = db_state()
    again = annotation_submit(annotation=ann, by=annotator, base_revision=1)
    assert (first.state, first.revision, again.revision) == ("submitted", 2, 2)
    assert db_state() == state
    assert list(AnnotationEvent.objects.filter(annotation=ann).values_list("action", flat=True)) == ["save", "submit"]


def test_submit_on_a_stale_revision_is_a_conflict(ann, annotator):
    save(ann, annotator, 0, all_labels(ann.taxonomy_version))
    with pytest.raises(AnnotationConflict):
        annotation_submit(annotation=ann, by=annotator, base_revision=0)


def test_a_submitted_annotation_is_read_only_until_reopened(ann, annotator):
    labels = all_labels(ann.taxonomy_version)
    save(ann, annotator, 0, labels)
    annotation_submit(annotation=ann, by=annotator, base_revision=1)
    labels[0]["rationale"] = "typed by accident"
    before = db_state()
    with pytest.raises(AnnotationSubmittedReadOnly, match="submitted, so it is read-only.*Reopen it"):
        save(ann, annotator, 2, labels)
    assert db_state() == before
    reopened = annotation_reopen(annotation=ann, by=annotator, base_revision=2)
    assert (reopened.state, reopened.submitted_at, reopened.revision) == ("draft", None, 3)
    assert save(ann, annotator, 3, labels).state == "draft"
    annotation_submit(annotation=ann, by=annotator, base_revision=4)
    actions = AnnotationEvent.objects.filter(annotation=ann).order_by("revision").values_list("action", flat=True)
    assert list(actions) == ["save", "submit", "reopen", "save", "submit"]


def test_the_same_state_sent_again_to_a_submitted_annotation_changes_nothing(ann, annotator):
    labels = all_labels(ann.taxonomy_version)
    save(ann, annotator, 0, labels)
    annotation_submit(annotation=ann, by=annotator, base_revision=1)
    before = db_state()
    assert save(ann, annotator, 1, labels).state == "submitted"  # a retried autosave: harmless
    assert db_state() == before


def test_reopening_a_draft_changes_nothing(ann, annotator):
    save(ann, annotator, 0, [one("1.1")])
    before = db_state()
    assert annotation_reopen(annotation=ann, by=annotator, base_revision=1).revision == 1
    assert db_state() == before


def test_snapshot_lists_labels_in_mode_order(ann, annotator):
    save(ann, annotator, 0, [one("3.1"), one("1.2"), one("2.4")])
    assert [lab["code"] for lab in annotation_snapshot(annotation=ann)["labels"]] == ["1.2", "2.4", "3.1"]


# ------------------------------------------------------------------ queue


def test_queue_counts_round_work_and_outside_traces(project, annotator):
    t1, t2, t3 = (make_trace(project, title=x) for x in "abc")
    rnd = make_round(project, traces=[t1], annotators=[annotator])
    ann = annotation_get_or_create(trace=t1, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd)
    save(ann, annotator, 0, [one("1.1")])
    outside = annotation_get_or_create(trace=t2, user=annotator, taxonomy_version=project.taxonomy_version)
    save(outside, annotator, 0, all_labels(project.taxonomy_version))
    annotation_submit(annotation=outside, by=annotator, base_revision=1)
    counts = queue_counts(user=annotator)
    assert (counts["rounds"].total, counts["rounds"].draft) == (1, 1)
    # t1 is in an open round, so outside the round only t2 and t3 are offered.
    assert (counts["traces"].total, counts["traces"].submitted, counts["traces"].todo) == (2, 1, 1)


def test_next_goes_to_unfinished_round_work_first(project, annotator):
    t1, t2 = make_trace(project, title="a"), make_trace(project, title="b")
    rnd = make_round(project, traces=[t2], annotators=[annotator])
    target = queue_next(user=annotator, after_trace_id=t1.pk)
    assert (target.trace_id, target.round_id) == (t2.pk, rnd.pk)


def test_next_walks_forward_through_unlabelled_traces(project, annotator):
    t1, t2, t3 = (make_trace(project, title=x) for x in "abc")
    target = queue_next(user=annotator, after_trace_id=t2.pk)
    assert (target.trace_id, target.round_id) == (t3.pk, None)
