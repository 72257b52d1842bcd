"""Adjudication rules: unanimous consensus, adjudicated decisions, closing, majority vote, ties,
discussion threads, agreed labels, and revising a definition from a disagreement."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from annotations.models import Adjudication
from annotations.rounds.agreed import agreed_labels
from annotations.rounds.disagreements import round_disagreements
from annotations.rounds.selectors import round_open_disagreement_count
from annotations.rounds.services import (
    adjudication_record,
    disagreement_comment_add,
    round_close,
    round_create,
    round_open,
    round_revise_definition,
)
from taxonomy.models import ModeMapping, TaxonomyVersion
from tests.annotations.rounds_factories import make_open_round, make_review_round, make_traces
from tests.factories import MembershipFactory, UserFactory


@pytest.fixture
def traces(project):
    return make_traces(project, 3)


@pytest.fixture
def review_round(project, manager, annotator, annotator2, traces):
    # ann1 alone says 1.3 on the first trace: one disagreement, everything else unanimous.
    return make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
    )


@pytest.fixture
def third(project):
    user = UserFactory(username="ann3")
    MembershipFactory(project=project, user=user, role="annotator")
    return user


def test_unanimous_units_become_consensus_when_review_starts(review_round, traces):
    rows = Adjudication.objects.filter(round=review_round)
    assert rows.count() == 3 * 14 - 1
    assert set(rows.values_list("basis", flat=True)) == {"unanimous"}
    assert rows.get(trace=traces[1], mode__code="1.1").decision == "present"
    assert rows.get(trace=traces[1], mode__code="1.3").decision == "absent"
    assert not rows.filter(trace=traces[0], mode__code="1.3").exists()


def test_disagreements_list_the_units_where_raters_differ(review_round, manager, traces):
    items = round_disagreements(round=review_round, user=manager)
    assert [(d.trace.pk, d.mode.code) for d in items] == [(traces[0].pk, "1.3")]
    assert [(lab.username, lab.decision) for lab in items[0].labels] == [("ann1", "present"), ("ann2", "absent")]
    assert items[0].labels[0].rationale == "ann1 saw it" and items[0].labels[0].evidence == [{"step": 1}]


def test_close_is_refused_while_a_disagreement_is_open(review_round, manager):
    with pytest.raises(ValidationError, match="1 disagreement"):
        round_close(round=review_round, by=manager)
    review_round.refresh_from_db()
    assert review_round.state == "review"


def test_adjudicating_every_disagreement_allows_close(review_round, manager, traces):
    adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="absent", note="Too weak", by=manager)
    assert round_open_disagreement_count(round=review_round) == 0
    round_close(round=review_round, by=manager)
    adj = Adjudication.objects.get(round=review_round, trace=traces[0], mode__code="1.3")
    assert (adj.decision, adj.basis, adj.note, adj.by) == ("absent", "adjudicated", "Too weak", manager)
    assert review_round.state == "closed" and not review_round.closed_with_majority


def test_recording_the_same_decision_twice_keeps_one_row(review_round, manager, traces):
    for _ in range(2):
        adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="present", by=manager)
    assert Adjudication.objects.filter(round=review_round, trace=traces[0], mode__code="1.3").count() == 1


def test_annotators_cannot_adjudicate(review_round, annotator, traces):
    with pytest.raises(ValidationError, match="Only managers"):
        adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="present", by=annotator)


def test_adjudication_outside_review_is_refused(project, manager, annotator, annotator2, traces):
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    with pytest.raises(ValidationError, match="Adjudication happens in review"):
        adjudication_record(round=rnd, trace=traces[0], mode="1.3", decision="present", by=manager)


def test_adjudicating_a_mode_of_another_version_is_refused(review_round, manager, traces):
    with pytest.raises(ValidationError, match="Mode '9.9' is not in"):
        adjudication_record(round=review_round, trace=traces[0], mode="9.9", decision="present", by=manager)


def test_close_with_majority_decides_the_rest(project, manager, annotator, annotator2, third, traces):
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2, third], traces=traces, disagree_on=traces[:2]
    )
    round_close(round=rnd, by=manager, with_majority=True)
    majority = Adjudication.objects.filter(round=rnd, basis="majority")
    assert sorted(majority.values_list("trace_id", "mode__code", "decision")) == sorted(
        [(traces[0].pk, "1.3", "absent"), (traces[1].pk, "1.3", "absent")]
    )
    assert rnd.closed_with_majority


def test_close_with_majority_refuses_ties(review_round, manager, traces):
    # Two annotators who disagree are a tie: a vote cannot decide it.
    with pytest.raises(ValidationError, match=rf"1 unit\(s\) are tied .*trace {traces[0].pk} / 1.3"):
        round_close(round=review_round, by=manager, with_majority=True)
    assert not Adjudication.objects.filter(round=review_round, basis="majority").exists()


def test_comment_thread_per_disagreement(review_round, manager, annotator, traces):
    disagreement_comment_add(
        round=review_round, trace=traces[0], mode="1.3", body="Step 1 is clear to me", by=annotator
    )
    disagreement_comment_add(round=review_round, trace=traces[0], mode="1.3", body="Not to me", by=manager)
    (item,) = round_disagreements(round=review_round, user=manager)
    assert [(c.author.username, c.body) for c in item.comments] == [
        ("ann1", "Step 1 is clear to me"),
        ("manager", "Not to me"),
    ]


def test_comments_wait_for_review(project, manager, annotator, annotator2, traces):
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    with pytest.raises(ValidationError, match="once the round is in review"):
        disagreement_comment_add(round=rnd, trace=traces[0], mode="1.3", body="hm", by=annotator)


def test_viewers_cannot_comment(review_round, viewer, traces):
    with pytest.raises(ValidationError, match="Only managers and the round's annotators"):
        disagreement_comment_add(round=review_round, trace=traces[0], mode="1.3", body="hm", by=viewer)


def test_agreed_labels_come_from_closed_rounds_only(review_round, project, manager, traces):
    assert agreed_labels(project=project) == []
    adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="present", by=manager)
    round_close(round=review_round, by=manager)
    rows = agreed_labels(project=project)
    assert len(rows) == 3 * 14
    row = next(r for r in rows if r.trace_id == traces[0].pk and r.mode_code == "1.3")
    assert (row.decision, row.basis, row.round_id) == ("present", "adjudicated", review_round.pk)


def test_agreed_labels_prefer_the_latest_closed_round(review_round, project, manager, annotator, annotator2, traces):
    adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="present", by=manager)
    round_close(round=review_round, by=manager)
    second = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces[:1], name="B"
    )
    round_close(round=second, by=manager)
    row = next(r for r in agreed_labels(project=project) if r.trace_id == traces[0].pk and r.mode_code == "1.3")
    assert (row.decision, row.round_id) == ("absent", second.pk)


def test_revising_a_definition_drafts_the_next_version(review_round, manager, mast_version):
    mode = round_revise_definition(
        round=review_round,
        mode_code="1.3",
        definition="Repeating a step already done, with no new input.",
        note="ann1 and ann2 read 'repetition' differently",
        by=manager,
    )
    draft = mode.version
    assert draft.status == TaxonomyVersion.Status.DRAFT and draft.parent == mast_version
    assert mode.definition.startswith("Repeating a step")
    edge = ModeMapping.objects.get(version=draft, old_code="1.3", new_code="1.3")
    assert (edge.kind, edge.note) == ("edit", "ann1 and ann2 read 'repetition' differently")


def test_a_second_revision_reuses_the_draft(review_round, manager):
    a = round_revise_definition(round=review_round, mode_code="1.3", definition="First.", by=manager)
    b = round_revise_definition(round=review_round, mode_code="1.1", definition="Second.", by=manager)
    assert a.version_id == b.version_id


def test_the_next_round_uses_and_publishes_the_revised_version(
    review_round, project, manager, annotator, annotator2, traces
):
    draft = round_revise_definition(round=review_round, mode_code="1.3", definition="Sharper.", by=manager).version
    nxt = round_create(
        project=project,
        name="Round B",
        taxonomy_version=draft,
        annotators=[annotator, annotator2],
        trace_ids=[t.pk for t in traces],
        by=manager,
    )
    round_open(round=nxt, by=manager)
    draft.refresh_from_db()
    assert draft.is_published and nxt.taxonomy_version_id == draft.pk


def test_a_label_submitted_in_review_reopens_its_unanimous_unit(project, manager, annotator, annotator2, traces):
    from tests.annotations.rounds_factories import label_via_workspace

    # Review starts with ann2's second trace still a draft (a submitted one could not change in review).
    review_round = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces,
        disagree_on=traces[:1],
        drafts=[(annotator2, traces[1])],
    )
    # ann2 now submits it seeing 1.2 too: that unit is no longer unanimous.
    label_via_workspace(round=review_round, user=annotator2, trace=traces[1], present={"1.1", "1.2"})
    assert round_open_disagreement_count(round=review_round) == 2
    assert (traces[1].pk, "1.2") in {
        (d.trace.pk, d.mode.code) for d in round_disagreements(round=review_round, user=manager)
    }
    adjudication_record(round=review_round, trace=traces[0], mode="1.3", decision="absent", by=manager)
    with pytest.raises(ValidationError, match="1 disagreement"):
        round_close(round=review_round, by=manager)
    adjudication_record(round=review_round, trace=traces[1], mode="1.2", decision="absent", by=manager)
    round_close(round=review_round, by=manager)
    assert Adjudication.objects.get(round=review_round, trace=traces[1], mode__code="1.2").basis == "adjudicated"
