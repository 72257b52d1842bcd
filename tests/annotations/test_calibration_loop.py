"""The calibration loop across taxonomy versions, on PostgreSQL, through the real services and pages:
round 1 on v1, revise 1.5, publish v2 and make it the working version, round 2 on v2, close; then
every reader works on v2 with round 1's labels mapped onto it (README "The calibration loop")."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.models import Release
from annotations.releases.services import release_build, release_create
from annotations.rounds.agreed import agreed_labels_on_version
from annotations.rounds.selectors import round_kappa_trend
from annotations.rounds.services import round_close, round_create, round_open, round_revise_definition
from taxonomy.models import CrossMapping, TaxonomyVersion
from taxonomy.services import version_publish
from tests.annotations.rounds_factories import label_via_workspace, make_review_round, make_traces
from traces.models import Project

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def loop(project, manager, annotator, annotator2, mast_version):
    """Round 1 on v1 (5 traces), 1.5 revised into v2, v2 published and made the working version,
    round 2 on v2 (5 other traces), closed."""
    t1, t2 = make_traces(project, 5), make_traces(project, 5)
    r1 = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=t1, name="Round 1")
    round_close(round=r1, by=manager)
    mode = round_revise_definition(
        round=r1, mode_code="1.5", definition="Stops before the task's stated end condition is met.", by=manager
    )
    v2 = mode.version
    version_publish(version=v2, by=manager)
    resp = client_for(manager).post(
        reverse("project_working_version", kwargs={"slug": project.slug}), {"version": v2.pk}
    )
    assert resp.status_code == 302
    r2 = round_create(
        project=project,
        name="Round 2",
        taxonomy_version=v2,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[t.pk for t in t2],
        by=manager,
    )
    round_open(round=r2, by=manager)
    for user in (annotator, annotator2):
        for t in t2:
            label_via_workspace(round=r2, user=user, trace=t, present={"1.5"})
    from annotations.rounds.services import round_start_review

    round_start_review(round=r2, by=manager)
    round_close(round=r2, by=manager)
    project.refresh_from_db()
    return {"v1": mast_version, "v2": v2, "r1": r1, "r2": r2, "t1": t1, "t2": t2}


def test_publishing_the_revision_made_it_the_working_version(loop, project):
    assert project.taxonomy_version == loop["v2"]


def test_the_dashboard_counts_both_rounds_traces_under_v2(loop, project, viewer):
    resp = client_for(viewer).get(reverse("annotations:dashboard", kwargs={"slug": project.slug}))
    assert resp.context["summary"]["traces"] == 10
    assert resp.context["target"] == loop["v2"]
    rows = {r["version"]: r for r in resp.context["mapping"]}
    assert rows["MAST v1"]["labels"] == 5 * 14 and rows["MAST v1"]["mapped"] == 5 * 14
    assert rows["MAST v2"]["is_target"] and rows["MAST v2"]["labels"] == 5 * 14
    assert "Labels on MAST v2" in resp.content.decode()


def test_the_dashboard_can_show_v1_with_round_2_mapped_back(loop, project, viewer):
    url = reverse("annotations:dashboard", kwargs={"slug": project.slug})
    resp = client_for(viewer).get(url, {"version": loop["v1"].pk})
    assert resp.context["target"] == loop["v1"] and resp.context["summary"]["traces"] == 10


def test_a_judge_run_defaults_to_the_working_version(loop, project, manager):
    from annotations.judge.runs import judge_run_create

    run = judge_run_create(
        project=project, by=manager, provider="openai", base_url="http://127.0.0.1:9/v1", model="m", start=False
    )
    assert run.taxonomy_version == loop["v2"]


def test_agreed_labels_on_v2_hold_both_rounds(loop, project):
    mapped = agreed_labels_on_version(project=project)
    assert mapped.target == loop["v2"] and len(mapped.labels) == 10
    assert all(mapped.labels[t.pk]["1.5"] == 1 for t in loop["t2"])
    assert all(mapped.labels[t.pk]["1.1"] == 1 for t in loop["t1"])  # round 1's labels, carried through the edit
    assert mapped.n_unknown == 0


def test_agreed_labels_of_round_2_in_v1_codes(loop, project):
    mapped = agreed_labels_on_version(project=project, target=loop["v1"], round=loop["r2"])
    assert sorted(mapped.labels) == sorted(t.pk for t in loop["t2"])


def test_agreed_labels_api_maps_onto_the_target_and_says_from_where(loop, project, viewer):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(viewer)
    data = api.get(f"/api/projects/{project.slug}/agreed-labels/").json()
    assert data["count"] == 10 * 14 and data["target_version"] == loop["v2"].pk
    assert {r["version"] for r in data["mapping"]} == {"MAST v1", "MAST v2"}
    bad = api.get(f"/api/projects/{project.slug}/agreed-labels/", {"target_version": "x"})
    assert bad.status_code == 400 and "target_version" in bad.json()["errors"]


def test_the_release_holds_both_rounds_traces_with_mapping_counts(loop, project, manager, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    release = release_create(project=project, by=manager, enqueue=False)
    release_build(release_id=release.pk)
    release = Release.objects.get(pk=release.pk)
    assert release.taxonomy_version == loop["v2"] and release.n_traces == 10
    by_version = {r["version"]: r for r in release.manifest["mapping"]["by_version"]}
    assert by_version["MAST v1"]["mapped"] == 70 and by_version["MAST v2"]["is_target"]
    html = client_for(manager).get(reverse("annotations:release_list", kwargs={"slug": project.slug})).content.decode()
    assert "70 of 70 mapped from MAST v1" in html


def test_the_trend_has_both_rounds_and_one_version_mark(loop, project, viewer):
    rows = round_kappa_trend(project=project, user=viewer)
    assert [r["round"].name for r in rows] == ["Round 1", "Round 2"]
    assert [r["version_changed"] for r in rows] == [False, True]
    assert [m["old"] for m in rows[1]["revised"]] == ["1.5"]
    html = client_for(viewer).get(reverse("annotations:round_list", kwargs={"slug": project.slug})).content.decode()
    assert html.count('class="rd-version-line"') == 1 and "V2</text>" in html


def test_the_project_home_shows_where_the_work_stands(loop, project, manager):
    html = client_for(manager).get(reverse("project_detail", kwargs={"slug": project.slug})).content.decode()
    assert 'data-testid="status-working-version">MAST v2<' in html
    assert "Round 1" in html and "Round 2" in html
    assert "No LLM judge run on MAST v2 yet" in html


def test_home_page_query_count_is_pinned(loop, project, manager, django_assert_num_queries):
    c = client_for(manager)
    url = reverse("project_detail", kwargs={"slug": project.slug})
    c.get(url)
    with django_assert_num_queries(12):
        assert c.get(url).status_code == 200


def test_a_round_on_a_newer_draft_moves_the_project_when_it_opens(project, manager, annotator, annotator2):
    from taxonomy.services import version_draft_from

    v2 = version_draft_from(source=project.taxonomy_version, by=manager)
    rnd = round_create(
        project=project,
        name="On the draft",
        taxonomy_version=v2,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[t.pk for t in make_traces(project, 2)],
        make_working_version=True,
        by=manager,
    )
    assert Project.objects.get(pk=project.pk).taxonomy_version != v2 and rnd.makes_working_version
    round_open(round=rnd, by=manager)
    assert Project.objects.get(pk=project.pk).taxonomy_version == v2


def test_a_round_on_an_older_version_leaves_the_working_version(project, manager, annotator, annotator2, mast_version):
    from taxonomy.services import version_draft_from

    v2 = version_draft_from(source=mast_version, by=manager)
    version_publish(version=v2)
    Project.objects.filter(pk=project.pk).update(taxonomy_version=v2)
    project.refresh_from_db()
    round_create(
        project=project,
        name="Back on v1",
        taxonomy_version=mast_version,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[t.pk for t in make_traces(project, 2)],
        make_working_version=True,
        by=manager,
    )
    assert Project.objects.get(pk=project.pk).taxonomy_version == v2


def test_settings_page_changes_the_working_version(project, manager, mast_version):
    from taxonomy.services import version_draft_from

    v2 = version_draft_from(source=mast_version, by=manager)
    url = reverse("project_settings", kwargs={"slug": project.slug})
    resp = client_for(manager).post(url, {"name": "Renamed", "description": "", "taxonomy_version": v2.pk})
    assert resp.status_code == 200 and "Select a valid choice" in resp.content.decode()  # a draft is not offered
    version_publish(version=v2)
    resp = client_for(manager).post(
        url, {"name": "Renamed", "description": "d", "taxonomy_version": v2.pk, "reveal_suggestions": "on"}
    )
    assert resp.status_code == 302
    project.refresh_from_db()
    assert (project.name, project.taxonomy_version, project.reveal_suggestions) == ("Renamed", v2, True)


def test_settings_page_is_for_managers_only(project, annotator):
    assert client_for(annotator).get(reverse("project_settings", kwargs={"slug": project.slug})).status_code == 403


def test_settings_api_patch(project, manager, annotator, mast_version):
    from rest_framework.test import APIClient

    from taxonomy.services import version_draft_from

    draft = version_draft_from(source=mast_version, by=manager)
    api = APIClient()
    api.force_authenticate(manager)
    url = f"/api/projects/{project.slug}/"
    refused = api.patch(url, {"taxonomy_version": draft.pk}, format="json")
    assert refused.status_code == 400 and "draft" in json.dumps(refused.json())
    version_publish(version=draft)
    ok = api.patch(url, {"taxonomy_version": draft.pk, "reveal_suggestions": True}, format="json")
    assert ok.status_code == 200 and ok.json()["taxonomy_version"] == draft.pk and ok.json()["reveal_suggestions"]
    api.force_authenticate(annotator)
    assert api.patch(url, {"name": "x"}, format="json").status_code == 403


def test_publish_offers_the_revision_as_working_version(project, manager, mast_version):
    from taxonomy.services import version_draft_from

    v2 = version_draft_from(source=mast_version, by=manager)
    c = client_for(manager)
    c.post(reverse("taxonomy:publish", kwargs={"slug": v2.taxonomy.slug, "number": v2.number}))
    html = c.get(reverse("taxonomy:version", kwargs={"slug": v2.taxonomy.slug, "number": v2.number})).content.decode()
    assert f"Make {v2.label} the working version of {project.name}" in html


def test_export_of_the_human_labelled_file_maps_all_four_rounds_onto_mast_v1(shared_dir, tmp_path, capsys):
    """The issue's "done when": import, then export_dataset with no other flag."""
    src = shared_dir / "mast" / "human_annotations" / "mad_human_labelled_19records.json"
    call_command("import_traces", str(src), "--project", "human")
    out = tmp_path / "out.jsonl"
    call_command("export_dataset", "--project", "human", "--format", "jsonl", "--out", str(out))
    said = capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 18  # 19 records, one trace in two rounds
    mast = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]
    assert all(sorted(r["mast_annotation"]) == sorted(mast) for r in records)
    assert "under MAST v1" in said
    for n in (1, 2, 3, 4):
        assert f"MAST-Data rounds v{n}:" in said
    assert "MAST-Data rounds v4: 56 labels, 56 mapped" in said
    assert (
        CrossMapping.objects.filter(target__taxonomy__name="MAST", auto=True).values("source").distinct().count() == 4
    )
    generalisability = TaxonomyVersion.objects.get(taxonomy__name="MAST-Data rounds", number=4)
    assert set(CrossMapping.objects.filter(source=generalisability).values_list("kind", flat=True)) == {"same"}
