"""Round services: creation rules, the state machine, sampling, the stored report."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from sklearn.metrics import cohen_kappa_score

from annotations.models import AgreementReport, Round
from annotations.rounds.sampling import round_sample_preview, sample_ids
from annotations.rounds.selectors import round_label_matrix, round_progress
from annotations.rounds.services import (
    agreement_report_get,
    round_close,
    round_create,
    round_labels_import,
    round_open,
    round_start_review,
    round_transition,
)
from taxonomy.models import TaxonomyVersion
from taxonomy.services import version_draft_from
from tests.annotations.rounds_factories import label_via_workspace, make_open_round, make_review_round, make_traces
from tests.factories import MembershipFactory, UserFactory


@pytest.fixture
def traces(project):
    return make_traces(project, 6)


@pytest.fixture
def draft_round(project, manager, annotator, annotator2, traces):
    return round_create(
        project=project,
        name="R1",
        taxonomy_version=project.taxonomy_version,
        annotators=[annotator, annotator2],
        trace_ids=[t.pk for t in traces[:3]],
        by=manager,
    )


# ---------------------------------------------------------------- creation


def test_round_needs_two_annotators(project, manager, annotator, traces):
    with pytest.raises(ValidationError, match="at least two annotators"):
        round_create(
            project=project,
            name="R",
            taxonomy_version=project.taxonomy_version,
            annotators=[annotator],
            trace_ids=[traces[0].pk],
            by=manager,
        )


def test_round_refuses_viewers_as_annotators(project, manager, annotator, viewer, traces):
    with pytest.raises(ValidationError, match="Not annotators of .*viewer"):
        round_create(
            project=project,
            name="R",
            taxonomy_version=project.taxonomy_version,
            annotators=[annotator, viewer],
            trace_ids=[traces[0].pk],
            by=manager,
        )


def test_only_managers_create_rounds(project, annotator, annotator2, traces):
    with pytest.raises(ValidationError, match="Only managers"):
        round_create(
            project=project,
            name="R",
            taxonomy_version=project.taxonomy_version,
            annotators=[annotator, annotator2],
            trace_ids=[traces[0].pk],
            by=annotator,
        )


def test_manual_round_refuses_traces_of_other_projects(project, manager, annotator, annotator2, traces):
    from tests.factories import ProjectFactory

    other = make_traces(ProjectFactory(slug="other"), 1)[0]
    with pytest.raises(ValidationError, match=f"not in the project: {other.pk}"):
        round_create(
            project=project,
            name="R",
            taxonomy_version=project.taxonomy_version,
            annotators=[annotator, annotator2],
            trace_ids=[traces[0].pk, other.pk],
            by=manager,
        )


def test_duplicate_round_name_is_refused(draft_round, project, manager, annotator, annotator2, traces):
    with pytest.raises(ValidationError, match="already exists"):
        round_create(
            project=project,
            name="R1",
            taxonomy_version=project.taxonomy_version,
            annotators=[annotator, annotator2],
            trace_ids=[traces[0].pk],
            by=manager,
        )


# ---------------------------------------------------------------- state machine


def test_opening_publishes_a_draft_taxonomy_version(project, manager, annotator, annotator2, traces, mast_version):
    draft = version_draft_from(source=mast_version)
    rnd = round_create(
        project=project,
        name="R",
        taxonomy_version=draft,
        annotators=[annotator, annotator2],
        trace_ids=[traces[0].pk],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    draft.refresh_from_db()
    assert rnd.state == Round.State.OPEN and draft.status == TaxonomyVersion.Status.PUBLISHED


@pytest.mark.parametrize(
    "state,to",
    [
        ("draft", "review"),
        ("draft", "closed"),
        ("draft", "draft"),
        ("open", "draft"),
        ("open", "closed"),
        ("open", "open"),
        ("review", "draft"),
        ("review", "open"),
        ("review", "review"),
        ("closed", "draft"),
        ("closed", "open"),
        ("closed", "review"),
        ("closed", "closed"),
    ],
)
def test_every_invalid_transition_is_refused(draft_round, manager, state, to):
    Round.objects.filter(pk=draft_round.pk).update(state=state)
    draft_round.refresh_from_db()
    with pytest.raises(ValidationError, match="cannot move|already|Cannot move"):
        round_transition(round=draft_round, to=to, by=manager, with_majority=True, force=True)
    draft_round.refresh_from_db()
    assert draft_round.state == state


def test_round_walks_draft_open_review_closed(draft_round, manager, annotator, annotator2, traces):
    round_open(round=draft_round, by=manager)
    for user in (annotator, annotator2):
        for t in traces[:3]:
            label_via_workspace(round=draft_round, user=user, trace=t, present={"1.1"})
    round_start_review(round=draft_round, by=manager)
    round_close(round=draft_round, by=manager)
    draft_round.refresh_from_db()
    assert draft_round.state == "closed"
    assert draft_round.opened_at and draft_round.review_at and draft_round.closed_at


def test_annotator_cannot_move_a_round(draft_round, annotator):
    with pytest.raises(ValidationError, match="Only managers"):
        round_open(round=draft_round, by=annotator)


def test_review_waits_for_every_submission(draft_round, manager, annotator, traces):
    round_open(round=draft_round, by=manager)
    label_via_workspace(round=draft_round, user=annotator, trace=traces[0], present={"1.1"})
    with pytest.raises(ValidationError, match="ann1 2, ann2 3"):
        round_start_review(round=draft_round, by=manager)


def test_review_can_be_forced_with_missing_submissions(draft_round, manager):
    round_open(round=draft_round, by=manager)
    round_start_review(round=draft_round, by=manager, force=True)
    assert draft_round.state == "review"


def test_progress_counts_submissions_per_annotator(draft_round, manager, annotator, traces):
    round_open(round=draft_round, by=manager)
    label_via_workspace(round=draft_round, user=annotator, trace=traces[0], present={"1.1"})
    label_via_workspace(round=draft_round, user=annotator, trace=traces[1], present={"1.1"}, submit=False)
    progress = round_progress(round=draft_round, details=True)
    ann1 = next(a for a in progress.annotators if a.username == "ann1")
    assert (ann1.submitted, ann1.drafts, ann1.total) == (1, 1, 3)
    states = {t.pk: s[annotator.pk] for t, s in progress.rows}
    assert states == {traces[0].pk: "submitted", traces[1].pk: "draft", traces[2].pk: ""}


# ---------------------------------------------------------------- sampling


def _candidates(n=60):
    return [(i, ["ChatDev", "MetaGPT", "AG2", "Magentic"][i % 4] if i % 7 else "HyperAgent") for i in range(1, n + 1)]


def test_same_seed_gives_same_sample():
    a = sample_ids(_candidates(), method="random", n=10, seed=7)
    b = sample_ids(list(reversed(_candidates())), method="random", n=10, seed=7)
    assert a == b and len(set(a)) == 10


def test_another_seed_gives_another_sample():
    assert sample_ids(_candidates(), method="random", n=10, seed=7) != sample_ids(
        _candidates(), method="random", n=10, seed=8
    )


def test_stratified_sample_covers_every_stratum():
    cands = _candidates()
    picked = sample_ids(cands, method="stratified", n=6, seed=3)
    strata = dict(cands)
    assert {strata[i] for i in picked} == set(strata.values()) and len(picked) == 6


def test_stratified_sample_is_proportional_and_reproducible():
    cands = [(i, "big") for i in range(1, 91)] + [(i, "small") for i in range(91, 101)]
    picked = sample_ids(cands, method="stratified", n=20, seed=1)
    assert picked == sample_ids(cands, method="stratified", n=20, seed=1)
    assert sum(1 for i in picked if i > 90) == 2


def test_stratified_sample_smaller_than_strata_count_is_refused():
    with pytest.raises(ValidationError, match="5 strata, but the sample size is 3"):
        sample_ids(_candidates(), method="stratified", n=3, seed=0)


def test_sample_larger_than_pool_is_refused():
    with pytest.raises(ValidationError, match="larger than the number of traces"):
        sample_ids(_candidates(10), method="random", n=11, seed=0)


def test_preview_equals_the_created_round(project, manager, annotator, annotator2, traces):
    preview = round_sample_preview(project=project, method="stratified", n=4, seed=5, stratify_by="framework")
    rnd = round_create(
        project=project,
        name="S",
        taxonomy_version=project.taxonomy_version,
        annotators=[annotator, annotator2],
        method="stratified",
        n=4,
        seed=5,
        stratify_by="framework",
        by=manager,
    )
    assert [t.pk for t in preview.traces] == list(rnd.round_traces.order_by("order").values_list("trace_id", flat=True))
    assert rnd.sampling["method"] == "stratified" and rnd.sampling["seed"] == 5
    assert {s["stratum"] for s in rnd.sampling["strata"]} == {"ChatDev", "MetaGPT", "AG2", "AppWorld"}


# ---------------------------------------------------------------- matrix and stored report


def test_label_matrix_maps_present_absent_and_unsure(project, manager, annotator, annotator2, traces):
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:2])
    label_via_workspace(round=rnd, user=annotator, trace=traces[0], present={"1.1"})
    # The workspace refuses to submit "unsure"; imported labels may carry it.
    from annotations.labels.services import rater_for_user

    round_labels_import(
        round=rnd, rater=rater_for_user(user=annotator2), labels={traces[0].pk: {"1.1": "unsure", "1.2": "absent"}}
    )
    m = round_label_matrix(round=rnd)
    assert m.raters == ["ann1", "ann2"] and m.labels.shape == (2, 2, 14)
    j = m.modes.index("1.1")
    assert m.labels[0, 0, j] == 1 and np.isnan(m.labels[1, 0, j]) and m.labels[1, 0, m.modes.index("1.2")] == 0
    assert np.isnan(m.labels[:, 1]).all()  # trace 2: nothing submitted


def test_drafts_are_not_in_the_matrix(project, manager, annotator, annotator2, traces):
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:1])
    label_via_workspace(round=rnd, user=annotator, trace=traces[0], present={"1.1"}, submit=False)
    assert np.isnan(round_label_matrix(round=rnd).labels).all()


def test_report_is_stored_and_reused(project, manager, annotator, annotator2, traces):
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces[:3], disagree_on=traces[:1]
    )
    stored = AgreementReport.objects.get(round=rnd, rater_set="humans")
    again = agreement_report_get(round=rnd)
    assert again.pk == stored.pk and again.computed_at == stored.computed_at


def test_report_is_recomputed_when_labels_change(project, manager, annotator, annotator2, traces):
    rnd = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces[:3],
        disagree_on=traces[:1],
        drafts=[(annotator2, traces[0])],
    )
    before = agreement_report_get(round=rnd)
    # A submitted label is read-only in review, but a draft left when review started may still be
    # submitted there: the report follows (here ann2 agrees with ann1's 1.3 on the first trace).
    label_via_workspace(round=rnd, user=annotator2, trace=traces[0], present={"1.1", "1.3"})
    after = agreement_report_get(round=rnd)
    assert after.fingerprint != before.fingerprint
    assert after.data != before.data


def test_report_kappa_matches_sklearn(project, manager, traces):
    users = []
    for name in ("r1", "r2", "r3"):
        u = UserFactory(username=name)
        MembershipFactory(project=project, user=u, role="annotator")
        users.append(u)
    rnd = make_open_round(project, manager=manager, annotators=users, traces=traces)
    rng = np.random.default_rng(0)
    from annotations.labels.services import rater_for_user
    from tests.annotations.rounds_factories import codes

    cs = codes(rnd.taxonomy_version)
    truth = rng.random((len(traces), len(cs))) < 0.3
    given = {}
    for u in users:
        noisy = np.where(rng.random(truth.shape) < 0.8, truth, ~truth)
        given[u.username] = noisy
        round_labels_import(
            round=rnd,
            rater=rater_for_user(user=u),
            labels={
                t.pk: {c: "present" if noisy[i, j] else "absent" for j, c in enumerate(cs)}
                for i, t in enumerate(traces)
            },
        )
    data = agreement_report_get(round=rnd).data
    for pair in data["pairwise"]:
        expected = cohen_kappa_score(given[pair["a"]].ravel(), given[pair["b"]].ravel())
        assert pair["kappa"]["value"] == pytest.approx(expected)


def test_non_human_rater_can_join_the_report(project, manager, annotator, annotator2, traces):
    from annotations.models import Annotation, ModeLabel, Rater

    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:2])
    judge = Rater.objects.create(kind="llm", name="judge-1")
    for t in traces[:2]:
        ann = Annotation.objects.create(trace=t, rater=judge, taxonomy_version=rnd.taxonomy_version, state="submitted")
        for mode in rnd.taxonomy_version.modes.all():
            ModeLabel.objects.create(annotation=ann, mode=mode, decision="present" if mode.code == "1.1" else "absent")
    report = agreement_report_get(round=rnd, extra_rater_ids=[judge.pk])
    assert report.rater_set == f"humans+{judge.pk}"
    assert report.data["raters"] == ["ann1", "ann2", "judge-1"]
    assert AgreementReport.objects.get(round=rnd, rater_set="humans").data["raters"] == ["ann1", "ann2"]


def test_unknown_extra_rater_is_refused(project, manager, annotator, annotator2, traces):
    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:1])
    with pytest.raises(ValidationError, match="no labels on this round"):
        agreement_report_get(round=rnd, extra_rater_ids=[999999])
