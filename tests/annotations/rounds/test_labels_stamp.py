"""The agreed-labels stamp (``LabelsStamp``, bumped by database triggers) and the caches keyed on it:
a cached figure is never stale after a decision, a round close or reopen, a deletion or a bulk
write that bypasses the services, and the cheap checks stay cheap (pinned query counts)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotations.models import Adjudication, AgreementReport, Round, RoundTrace
from annotations.rounds.agreed import agreed_labels_stamp
from annotations.rounds.selectors import round_labels_fingerprint_parts
from annotations.rounds.services import adjudication_record, agreement_report_get
from tests.annotations.releases_factories import closed_round, make_trace
from tests.annotations.rounds_factories import label_via_workspace, make_review_round, make_traces
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def agreed(project, mast_version):
    traces = [make_trace(project) for _ in range(4)]
    rnd = closed_round(project, mast_version, {t: ({"1.3"} if i < 2 else set()) for i, t in enumerate(traces)})
    return rnd, traces


def dashboard(client, project, **params):
    return client.get(reverse("annotations:dashboard", kwargs={"slug": project.slug}), params)


def test_a_project_without_rounds_has_stamp_zero(project):
    assert agreed_labels_stamp(project=project) == 0


def test_a_bulk_insert_of_adjudications_bumps_the_stamp_once(project, agreed, mast_version):
    rnd, traces = agreed
    before = agreed_labels_stamp(project=project)
    t = make_trace(project)
    RoundTrace.objects.create(round=rnd, trace=t, order=9)
    Adjudication.objects.bulk_create(
        Adjudication(round=rnd, trace=t, mode=m, decision="absent", basis="adjudicated")
        for m in mast_version.modes.all()
    )
    assert agreed_labels_stamp(project=project) == before + 1  # statement-level: 14 rows, one bump


def test_an_update_that_bypasses_the_services_bumps_the_stamp(project, agreed):
    rnd, _ = agreed
    before = agreed_labels_stamp(project=project)
    Adjudication.objects.filter(round=rnd, mode__code="1.3").update(decision="absent")  # no auto_now here
    assert agreed_labels_stamp(project=project) > before


def test_closing_reopening_and_deleting_a_round_bump_the_stamp(project, agreed):
    rnd, _ = agreed
    seen = [agreed_labels_stamp(project=project)]
    Round.objects.filter(pk=rnd.pk).update(state=Round.State.REVIEW, closed_at=None)
    seen.append(agreed_labels_stamp(project=project))
    Round.objects.filter(pk=rnd.pk).update(state=Round.State.CLOSED, closed_at=timezone.now())
    seen.append(agreed_labels_stamp(project=project))
    rnd.delete()  # cascades to its adjudications, then the round row
    seen.append(agreed_labels_stamp(project=project))
    assert seen == sorted(set(seen)), seen  # strictly increasing


def test_another_projects_writes_leave_the_stamp_alone(project, agreed, mast_version):
    before = agreed_labels_stamp(project=project)
    other = ProjectFactory(slug="elsewhere")
    closed_round(other, mast_version, {make_trace(other): {"1.1"}})
    assert agreed_labels_stamp(project=project) == before
    assert agreed_labels_stamp(project=other) > 0


def test_cached_dashboard_follows_a_decision_changed_after_the_close(client, project, viewer, agreed):
    client.force_login(viewer)
    rnd, traces = agreed
    assert dashboard(client, project).context["summary"]["failures"] == 2
    # a bulk correction that neither goes through a service nor touches Adjudication.at
    Adjudication.objects.filter(round=rnd, trace=traces[2], mode__code="2.6").update(decision="present")
    assert dashboard(client, project).context["summary"]["failures"] == 3


def test_cached_dashboard_forgets_a_deleted_round(client, project, viewer, agreed):
    client.force_login(viewer)
    rnd, _ = agreed
    assert dashboard(client, project).context["summary"]["traces"] == 4
    rnd.delete()
    assert dashboard(client, project).context["summary"]["traces"] == 0


def test_cached_paper_table_follows_a_reopened_round(client, project, viewer, agreed):
    client.force_login(viewer)
    rnd, _ = agreed
    path = f"/api/projects/{project.slug}/analytics/framework-modes/"

    def n_traces():
        rows = client.get(path).json()["rows"]
        return max([r["n_traces"] for r in rows if r["framework"] == "All frameworks"], default=0)

    assert n_traces() == 4
    Round.objects.filter(pk=rnd.pk).update(state=Round.State.REVIEW)  # reopened: no longer agreed
    assert n_traces() == 0


def test_a_cached_dashboard_check_reads_no_adjudication(client, project, viewer, agreed, django_assert_max_num_queries):
    client.force_login(viewer)
    dashboard(client, project)
    with django_assert_max_num_queries(12) as ctx:  # +1: the traces blind for her
        dashboard(client, project)
    assert not [q for q in ctx.captured_queries if "annotations_adjudication" in q["sql"]]


def test_cached_filter_choices_follow_an_import(client, project, viewer, agreed):
    client.force_login(viewer)
    assert "AutoGen" not in dashboard(client, project).context["choices"]["mas_name"]
    make_trace(project, mas_name="AutoGen")
    assert "AutoGen" in dashboard(client, project).context["choices"]["mas_name"]


@pytest.fixture
def review_round(project, manager, annotator, annotator2):
    traces = make_traces(project, 3)
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
    )
    return rnd, traces


def test_the_report_freshness_check_reads_no_mode_label(review_round, django_assert_max_num_queries):
    rnd, _ = review_round
    with django_assert_max_num_queries(3) as ctx:
        round_labels_fingerprint_parts(round=rnd)
    assert not [q for q in ctx.captured_queries if "annotations_modelabel" in q["sql"]]


def test_the_stored_report_follows_a_label_submitted_in_review(project, manager, annotator, annotator2):
    # A submitted annotation is read-only in review; a draft left when review started may still be submitted.
    traces = make_traces(project, 3)
    rnd = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces,
        disagree_on=traces[:1],
        drafts=[(annotator2, traces[1])],
    )
    before = agreement_report_get(round=rnd)
    label_via_workspace(round=rnd, user=annotator2, trace=traces[1], present={"1.1", "1.2"})
    after = agreement_report_get(round=rnd)
    assert after.fingerprint != before.fingerprint
    assert after.data != before.data


def test_a_decision_in_review_bumps_the_stamp_and_leaves_the_stored_report(review_round, project, manager):
    rnd, traces = review_round
    stored = agreement_report_get(round=rnd)
    before = agreed_labels_stamp(project=project)
    adjudication_record(round=rnd, trace=traces[0], mode="1.1", decision="present", by=manager)
    assert agreed_labels_stamp(project=project) > before
    # the report is about the raters' labels, which did not change
    assert AgreementReport.objects.get(pk=stored.pk).computed_at == agreement_report_get(round=rnd).computed_at


def test_a_report_stored_without_prevalences_gets_them_without_a_recompute(review_round, annotator):
    rnd, _ = review_round
    stored = agreement_report_get(round=rnd)
    expected = stored.data["rater_prevalence"]
    data = {k: v for k, v in stored.data.items() if k != "rater_prevalence"} | {"kept": True}
    AgreementReport.objects.filter(pk=stored.pk).update(data=data)
    again = agreement_report_get(round=rnd)
    assert again.data["kept"] is True  # the stored statistics were kept, not recomputed
    assert again.data["rater_prevalence"] == expected
    assert expected[annotator.username]["1.1"] == 1.0
