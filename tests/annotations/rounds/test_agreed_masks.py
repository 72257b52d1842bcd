"""``AgreedMask`` (one row per round and trace, kept by PostgreSQL triggers) stays equal to the
adjudications folded from scratch after every kind of write: review decisions, the unanimous rows
of starting review, closing with a majority, bulk inserts, updates that move rows between rounds
and modes, COPY, deletions and cascades, an import of MAST-Data's human labels, edits of a
version's modes and of a round's version, TRUNCATE. And the dashboard reads it: a reopened
round's rows stay but do not count."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from annotations.models import Adjudication, AgreedMask, Round, RoundTrace
from annotations.rounds.agreed import agreed_label_masks, agreed_mask_arrays, agreed_mask_layout
from annotations.rounds.services import adjudication_record, round_close
from taxonomy.models import FailureMode
from tests.annotations.releases_factories import closed_round, make_trace
from tests.annotations.rounds_factories import make_review_round, make_traces

pytestmark = pytest.mark.django_db


def from_scratch() -> set[tuple]:
    """Every round's adjudications folded per (round, trace) in SQL by ``agreed_label_masks``
    (the aggregation the dashboard ran before), bits in the masks' layout (modes in id order)."""
    rounds = dict(Round.objects.values_list("pk", "taxonomy_version_id"))
    layout = agreed_mask_layout(version_ids=set(rounds.values()))
    modes = {
        vid: list(FailureMode.objects.filter(version_id=vid).order_by("id").values_list("id", "code")) for vid in layout
    }
    out = set()
    # per version, so each round's modes get the bits of its own version only
    for vid in modes:
        adj = Adjudication.objects.filter(round__taxonomy_version_id=vid, mode__version_id=vid)
        for tid, rid, _v, p, k, u, m in agreed_label_masks(adjudications=adj, modes={vid: modes[vid]}, bases=True):
            if k:
                out.add((rid, tid, p, k, u, m))
    return out


def stored() -> set[tuple]:
    return set(AgreedMask.objects.values_list("round_id", "trace_id", "present", "known", "unanimous", "majority"))


def assert_true_to_the_adjudications():
    expected = from_scratch()
    assert stored() == expected


@pytest.fixture
def two_rounds(project, mast_version):
    traces = [make_trace(project) for _ in range(4)]
    first = closed_round(project, mast_version, {t: ({"1.3"} if i < 2 else set()) for i, t in enumerate(traces)})
    second = closed_round(project, mast_version, {traces[0]: {"2.1"}, traces[1]: set()}, basis="majority")
    return first, second, traces


def test_closed_rounds_written_in_bulk_have_one_mask_row_per_trace(two_rounds):
    first, second, _ = two_rounds
    assert AgreedMask.objects.filter(round=first).count() == 4
    assert AgreedMask.objects.filter(round=second).count() == 2
    assert_true_to_the_adjudications()


def test_review_decisions_unanimous_rows_and_majority_close_keep_masks_true(
    project, manager, annotator, annotator2, mast_version
):
    traces = make_traces(project, 3)
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:2]
    )
    assert AgreedMask.objects.filter(round=rnd).count() == 3  # the unanimous rows of starting review
    assert_true_to_the_adjudications()
    adjudication_record(round=rnd, trace=traces[0], mode="1.3", decision="present", by=manager)
    assert_true_to_the_adjudications()
    adjudication_record(round=rnd, trace=traces[0], mode="1.3", decision="absent", by=manager)  # changed mind
    assert_true_to_the_adjudications()
    with pytest.raises(Exception, match="tied"):
        round_close(round=rnd, by=manager, with_majority=True)  # 2 raters split on traces[1]: a tie
    adjudication_record(round=rnd, trace=traces[1], mode="1.3", decision="present", by=manager)
    round_close(round=rnd, by=manager)
    assert_true_to_the_adjudications()


def test_updates_moving_adjudications_between_rounds_and_modes_keep_both_sides_true(two_rounds, mast_version):
    first, second, traces = two_rounds
    m13, m21 = mast_version.modes.get(code="1.3"), mast_version.modes.get(code="2.1")
    # what the loop bench does in SQL: move a trace's consensus to another round
    Adjudication.objects.filter(round=first, trace=traces[2]).update(round=second)
    assert_true_to_the_adjudications()
    Adjudication.objects.filter(round=first, trace=traces[0], mode=m13).delete()
    Adjudication.objects.filter(round=first, trace=traces[0], mode=m21).update(mode=m13, decision="present")
    assert_true_to_the_adjudications()
    Adjudication.objects.filter(round=second).update(basis="unanimous")
    assert_true_to_the_adjudications()


def test_copy_of_adjudications_is_folded_by_the_trigger(two_rounds, mast_version, project):
    first, _, _ = two_rounds
    t = make_trace(project)
    RoundTrace.objects.create(round=first, trace=t, order=9)
    rows = [
        (first.pk, t.pk, mid, "present" if code == "1.1" else "absent")
        for code, mid in mast_version.modes.values_list("code", "id")
    ]
    with (
        connection.cursor() as cur,
        cur.cursor.copy(
            "COPY annotations_adjudication (round_id, trace_id, mode_id, decision, basis, note, at) FROM STDIN"
        ) as copy,
    ):
        for rid, tid, mid, decision in rows:
            copy.write_row((rid, tid, mid, decision, "adjudicated", "", timezone.now()))
    assert AgreedMask.objects.filter(round=first, trace=t).exists()
    assert_true_to_the_adjudications()


def test_deleting_a_trace_a_round_or_everything_removes_their_masks(two_rounds):
    first, second, traces = two_rounds
    traces[0].delete()  # cascades to its adjudications in both rounds
    assert_true_to_the_adjudications()
    assert not AgreedMask.objects.filter(trace_id=traces[0].pk).exists()
    second.delete()
    assert_true_to_the_adjudications()
    assert not AgreedMask.objects.filter(round_id=second.pk).exists()
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # TRUNCATE refuses pending deferred FK checks
        cur.execute("TRUNCATE annotations_adjudication")
    assert stored() == set()


def test_moving_a_round_to_another_version_recomputes_its_masks(two_rounds, mast_version):
    from taxonomy.services import version_draft_from

    first, _, _ = two_rounds
    draft = version_draft_from(source=mast_version)
    Round.objects.filter(pk=first.pk).update(taxonomy_version=draft)
    # its adjudications are on v1's modes, no longer its version's: no bits to give them
    assert not AgreedMask.objects.filter(round=first).exists()
    assert_true_to_the_adjudications()
    Round.objects.filter(pk=first.pk).update(taxonomy_version=mast_version)
    assert AgreedMask.objects.filter(round=first).count() == 4
    assert_true_to_the_adjudications()


def test_removing_or_adding_a_mode_of_a_rounds_version_recomputes_the_bits(project, mast_version):
    from taxonomy.services import version_draft_from

    draft = version_draft_from(source=mast_version)
    modes = list(FailureMode.objects.filter(version=draft).order_by("id"))
    rnd = Round.objects.create(project=project, name="on the draft", taxonomy_version=draft, state="closed")
    t = make_trace(project)
    Adjudication.objects.bulk_create(  # every mode but the first (in id order), which holds bit 0
        Adjudication(round=rnd, trace=t, mode=m, decision="present" if i % 2 else "absent", basis="adjudicated")
        for i, m in enumerate(modes)
        if i
    )
    before = stored()
    assert_true_to_the_adjudications()
    FailureMode.objects.filter(pk=modes[0].pk).delete()  # every later mode moves down one bit
    assert stored() != before
    assert_true_to_the_adjudications()
    FailureMode.objects.create(version=draft, category=modes[0].category, code="9.9", name="New", definition="x")
    assert_true_to_the_adjudications()


def test_an_import_of_human_labelled_rounds_leaves_masks_true(project, manager, shared_dir):
    from traces.importing.service import traces_import

    traces_import(
        project=project,
        paths_or_files=[shared_dir / "mast/human_annotations/mad_human_labelled_19records.json"],
        by=manager,
    )
    assert Round.objects.filter(project=project).count() > 1
    assert AgreedMask.objects.count() > 0
    assert_true_to_the_adjudications()


def test_a_reopened_round_keeps_its_masks_but_they_do_not_count(two_rounds, project):
    first, second, traces = two_rounds
    assert len(agreed_mask_arrays(project=project).trace_ids) == 6
    Round.objects.filter(pk=second.pk).update(state=Round.State.REVIEW, closed_at=None)
    masks = agreed_mask_arrays(project=project)
    assert len(masks.trace_ids) == 4
    assert AgreedMask.objects.filter(round=second).count() == 2  # kept, for when it closes again
    Round.objects.filter(pk=second.pk).update(state=Round.State.CLOSED, closed_at=timezone.now())
    masks = agreed_mask_arrays(project=project)
    assert masks.trace_ids.tolist()[-2:] == [traces[0].pk, traces[1].pk]  # the latest closed round last
