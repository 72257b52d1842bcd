"""The analytics dashboard page: label sources and the blind rule, filters, downloads, query count."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import pytest
from django.urls import reverse

from annotations.models import Round
from tests.annotations.releases_factories import annotate, closed_round, decisions, human_rater, make_trace, other_rater

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(project, mast_version, manager, annotator, annotator2):
    traces = []
    for i in range(6):
        traces.append(
            make_trace(
                project,
                mas_name="ChatDev" if i < 3 else "MetaGPT <b>x</b>",
                llm_name="gpt-4o" if i % 2 else "claude",
                n_steps=10 + i,
                n_agent_switches=i,
            )
        )
    closed_round(project, mast_version, {t: ({"1.3", "2.6"} if i < 3 else {"3.3"}) for i, t in enumerate(traces)})
    judge = other_rater("gpt-judge")
    for t in traces:
        annotate(t, judge, mast_version, decisions(mast_version, {"1.1"}))
    # a label by ann2 outside rounds: annotators and viewers must not see it
    annotate(traces[0], human_rater(annotator2), mast_version, decisions(mast_version, {"1.5"}))
    return {"traces": traces, "judge": judge}


def url(project, **params):
    base = reverse("annotations:dashboard", kwargs={"slug": project.slug})
    from urllib.parse import urlencode

    return base + ("?" + urlencode(params, doseq=True) if params else "")


def test_dashboard_shows_agreed_labels_to_every_member(client, project, viewer, data):
    client.force_login(viewer)
    resp = client.get(url(project))
    assert resp.status_code == 200
    assert resp.context["summary"]["traces"] == 6
    assert resp.context["summary"]["failures"] == 3 * 2 + 3


def test_share_of_failures_chart_data_as_csv(client, project, viewer, data):
    client.force_login(viewer)
    resp = client.get(url(project, format="csv", chart="modes_failures"))
    assert resp["Content-Type"].startswith("text/csv")
    rows = {r["mode"]: r for r in csv.DictReader(io.StringIO(resp.content.decode()))}
    assert float(rows["1.3"]["share_of_failures"]) == pytest.approx(3 / 9, abs=1e-4)
    assert float(rows["3.3"]["share_of_traces"]) == pytest.approx(0.5)


def test_a_framework_named_like_a_formula_downloads_as_inert_text(client, project, viewer, mast_version):
    traces = [make_trace(project, mas_name='=HYPERLINK("http://x","y")', n_steps=5) for _ in range(2)]
    closed_round(project, mast_version, {t: {"1.3"} for t in traces})
    client.force_login(viewer)
    resp = client.get(url(project, format="csv", chart="frameworks_rate"))
    rows = list(csv.reader(io.StringIO(resp.content.decode())))
    cells = [cell for row in rows[1:] for cell in row]
    assert '\'=HYPERLINK("http://x","y")' in cells
    assert not any(cell.startswith("=") for cell in cells)


def test_chart_svg_download_is_valid_xml_with_escaped_names(client, project, viewer, data):
    client.force_login(viewer)
    resp = client.get(url(project, format="svg", chart="frameworks_rate"))
    body = resp.content.decode()
    assert resp["Content-Type"].startswith("image/svg+xml")
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body
    ET.fromstring(body)  # noqa: S314 - our own output


def test_framework_filter_restricts_the_traces(client, project, viewer, data):
    client.force_login(viewer)
    resp = client.get(url(project, mas_name="ChatDev"))
    assert resp.context["summary"]["traces"] == 3


def test_annotator_cannot_pick_another_persons_labels(client, project, annotator, annotator2, data):
    client.force_login(annotator)
    other = str(human_rater(annotator2).pk)
    resp = client.get(url(project, rater=other))
    assert other not in [v for v, _ in resp.context["sources"]]
    assert resp.context["source"] == "agreed"


def test_manager_sees_the_llm_judge_labels(client, project, manager, data):
    client.force_login(manager)
    resp = client.get(url(project, rater=str(data["judge"].pk)))
    assert resp.context["source"] == str(data["judge"].pk)
    assert resp.context["summary"]["failures"] == 6


def test_cohort_comparison_shows_fisher_p_per_mode(client, project, viewer, data):
    client.force_login(viewer)
    resp = client.get(url(project, a="mas_name:ChatDev", b="mas_name:MetaGPT <b>x</b>"))
    chart = resp.context["charts"]["cohort"]
    row = next(r for r in chart.rows if r[0] == "1.3")
    assert row[3] == 1.0 and row[6] == 0.0
    assert row[7] == pytest.approx(0.1, abs=1e-6)  # Fisher's exact p of [[3,0],[0,3]]


def test_agreed_labels_of_rounds_still_in_review_are_not_counted(client, project, viewer, data, mast_version):
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"1.1"}}, state=Round.State.REVIEW)
    client.force_login(viewer)
    assert client.get(url(project)).context["summary"]["traces"] == 6


def test_outsider_gets_404(client, project, outsider, data):
    client.force_login(outsider)
    assert client.get(url(project)).status_code == 404


def test_dashboard_query_count_is_pinned(client, project, manager, data, django_assert_num_queries):
    client.force_login(manager)
    client.get(url(project, mas_name="AG2"))  # warm the session; another filter, so nothing is cached for the next
    # 17: the project version's modes are cached by version_modes since the first request; the
    # target version's choices (the version graph: 2, the versions: 1), the mappings' fingerprint (1),
    # and the versions once more for the mapping-counts block; the agreed labels in 3: the closed
    # rounds (order and versions), their versions' bit layouts, the AgreedMask rows (one per
    # round and trace, kept by triggers: no aggregate over adjudications); the filter
    # choices come from the cache the first request filled (keyed on the traces' count and last id)
    with django_assert_num_queries(18):  # +1: the traces blind for her (agreed labels leave them out)
        resp = client.get(url(project, a="mas_name:ChatDev", b="llm_name:claude"))
    assert resp.status_code == 200


def test_cached_dashboard_reflects_a_newly_closed_round(client, project, viewer, data, mast_version):
    client.force_login(viewer)
    assert client.get(url(project)).context["summary"]["traces"] == 6
    closed_round(project, mast_version, {make_trace(project): {"1.1"}})
    assert client.get(url(project)).context["summary"]["traces"] == 7


def test_repeat_request_is_served_from_the_cache_in_fewer_queries(
    client, project, viewer, data, django_assert_num_queries
):
    client.force_login(viewer)
    client.get(url(project))
    # 7 + the target version's choices (3) and the mappings' fingerprint; the filter choices are cached
    with django_assert_num_queries(12):  # +1: the traces blind for her (in the cache key)
        client.get(url(project))


def test_labels_of_an_older_taxonomy_version_are_mapped_onto_the_projects(client, project, viewer, mast_version):
    from taxonomy.services import mode_rename, version_draft_from, version_publish

    v2 = version_draft_from(source=mast_version)
    mode_rename(mode=v2.modes.get(code="1.3"), new_code="1.3r", new_name="Repeated steps")
    version_publish(version=v2)
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"1.3"}})
    project.taxonomy_version = v2
    project.save(update_fields=["taxonomy_version"])
    client.force_login(viewer)
    resp = client.get(url(project, format="csv", chart="modes_failures"))
    rows = {r["mode"]: r for r in csv.DictReader(io.StringIO(resp.content.decode()))}
    assert "1.3" not in rows and rows["1.3r"]["present"] == "1"


def test_a_new_cohort_reuses_the_cached_label_matrix(client, project, viewer, data, django_assert_num_queries):
    client.force_login(viewer)
    client.get(url(project))
    with django_assert_num_queries(12):  # +1 blind traces; the matrix and filter choices are cached
        resp = client.get(url(project, a="mas_name:ChatDev", b="llm_name:claude"))
    assert "cohort" in resp.context["charts"]


def test_dashboard_after_a_decision_query_count_is_pinned(client, project, manager, data, django_assert_num_queries):
    from annotations.models import Adjudication

    client.force_login(manager)
    client.get(url(project))
    rnd = Round.objects.get(project=project, state="closed")
    adj = Adjudication.objects.filter(round=rnd).order_by("id").first()
    Adjudication.objects.filter(pk=adj.pk).update(decision="absent" if adj.decision == "present" else "present")
    # 16 = the pinned cold request's 17 less the traces' columns (cached per the traces' count and
    # last id, as their distinct values are): the labels' stamp moved, so only labels are read again
    with django_assert_num_queries(17):  # +1: the traces blind for her
        resp = client.get(url(project))
    assert resp.status_code == 200
