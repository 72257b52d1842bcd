"""Who may create and download releases (pages and API), and the export_dataset command.

Decision: managers create releases and always download them; annotators and viewers download
published releases only when a manager allows it (ReleasePolicy.members_may_download, off by
default); non-members get 404.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.models import Release
from annotations.releases.services import release_build, release_create, release_policy_set
from tests.annotations.releases_factories import closed_round, make_trace

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def published(project, mast_version, manager):
    traces = [make_trace(project, mas_name=fw) for fw in ("ChatDev", "MetaGPT", "AG2")]
    closed_round(project, mast_version, {t: {"1.3"} for t in traces}, name="R1")
    release = release_create(project=project, by=manager, enqueue=False, title="First")
    return release_build(release_id=release.pk)


def zip_url(project, n=1):
    return reverse("annotations:release_download", kwargs={"slug": project.slug, "number": n})


def test_manager_downloads_the_zip_from_the_page(client, project, manager, published):
    client.force_login(manager)
    resp = client.get(zip_url(project))
    assert resp.status_code == 200
    with zipfile.ZipFile(io.BytesIO(b"".join(resp.streaming_content))) as zf:
        assert "demo-v1/data.jsonl" in zf.namelist()


def test_annotator_cannot_download_unless_allowed(client, project, annotator, published):
    client.force_login(annotator)
    assert client.get(zip_url(project)).status_code == 403


def test_annotator_downloads_once_a_manager_allows_members(client, project, manager, annotator, published):
    release_policy_set(project=project, by=manager, members_may_download=True)
    client.force_login(annotator)
    assert client.get(zip_url(project)).status_code == 200


def test_viewer_cannot_download_unless_allowed(client, project, viewer, published):
    client.force_login(viewer)
    assert client.get(zip_url(project)).status_code == 403


def test_outsider_gets_404_for_a_release(client, project, outsider, published):
    client.force_login(outsider)
    assert client.get(zip_url(project)).status_code == 404


def test_annotator_sees_the_list_without_form_or_download(client, project, annotator, published):
    client.force_login(annotator)
    resp = client.get(reverse("annotations:release_list", kwargs={"slug": project.slug}))
    body = resp.content.decode()
    assert resp.status_code == 200 and "v1" in body
    assert "Build release" not in body and zip_url(project) not in body


def test_annotator_cannot_create_a_release_by_post(client, project, annotator):
    client.force_login(annotator)
    resp = client.post(reverse("annotations:release_list", kwargs={"slug": project.slug}), {"selection": "agreed"})
    assert resp.status_code == 403
    assert not Release.objects.exists()


def test_annotator_cannot_change_the_download_policy(client, project, annotator):
    client.force_login(annotator)
    resp = client.post(reverse("annotations:release_policy", kwargs={"slug": project.slug}), {"allow": "1"})
    assert resp.status_code == 403


def test_manager_creates_a_release_with_the_form(
    client, project, manager, mast_version, django_capture_on_commit_callbacks
):
    closed_round(project, mast_version, {make_trace(project): {"1.1"}})
    client.force_login(manager)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        resp = client.post(
            reverse("annotations:release_list", kwargs={"slug": project.slug}),
            {
                "selection": "agreed",
                "taxonomy_version": mast_version.pk,
                "raters": "on",
                "formats": ["jsonl"],
                "title": "Spring",
            },
        )
    assert resp.status_code == 302
    release = Release.objects.get()
    assert (release.title, release.options["formats"], release.status) == ("Spring", ["jsonl"], "queued")
    assert len(callbacks) == 1  # the build job is enqueued once the row is committed


# ------------------------------------------------------------------ API


def test_api_lists_releases_with_checksums_in_pinned_queries(
    client, project, manager, published, django_assert_num_queries
):
    client.force_login(manager)
    url = reverse("api-release-list", kwargs={"slug": project.slug})
    client.get(url)
    with django_assert_num_queries(7):
        resp = client.get(url)
    data = resp.json()
    assert data["count"] == 1
    assert {f["name"] for f in data["results"][0]["files"]} >= {"data.jsonl", "demo-v1.zip"}


def test_api_release_detail_has_the_manifest(client, project, viewer, published):
    client.force_login(viewer)
    resp = client.get(reverse("api-release-detail", kwargs={"slug": project.slug, "number": 1}))
    assert resp.json()["manifest"]["counts"]["traces"] == 3


def test_api_annotator_cannot_create(client, project, annotator):
    client.force_login(annotator)
    resp = client.post(reverse("api-release-list", kwargs={"slug": project.slug}), {}, content_type="application/json")
    assert resp.status_code == 403


def test_api_manager_creates_and_gets_202(client, project, manager):
    client.force_login(manager)
    resp = client.post(
        reverse("api-release-list", kwargs={"slug": project.slug}),
        {"options": {"formats": ["csv"], "trace_text": False}},
        content_type="application/json",
    )
    assert resp.status_code == 202
    assert resp.json()["options"]["formats"] == ["csv"]


def test_api_download_follows_the_policy(client, project, manager, annotator, published):
    url = reverse("api-release-download", kwargs={"slug": project.slug, "number": 1})
    client.force_login(annotator)
    assert client.get(url).status_code == 403
    release_policy_set(project=project, by=manager, members_may_download=True)
    assert client.get(url).status_code == 200


# ------------------------------------------------------------------ command


def test_export_dataset_writes_a_jsonl_file(project, mast_version, tmp_path):
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"2.6"}})
    out = tmp_path / "labels.jsonl"
    call_command("export_dataset", project="demo", format="jsonl", out=str(out), stdout=io.StringIO())
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["trace_id"] == t.external_id and rec["mast_annotation"]["2.6"] == 1


def test_export_dataset_to_a_zip_adds_card_and_manifest(project, mast_version, tmp_path):
    closed_round(project, mast_version, {make_trace(project): set()})
    out = tmp_path / "export.zip"
    call_command("export_dataset", project="demo", format="parquet", out=str(out), stdout=io.StringIO())
    with zipfile.ZipFile(out) as zf:
        assert sorted(zf.namelist()) == ["export/README.md", "export/data.parquet", "export/manifest.json"]


def test_export_dataset_names_an_unknown_project(db, tmp_path):
    with pytest.raises(CommandError, match="nope"):
        call_command("export_dataset", project="nope", format="csv", out=str(tmp_path / "x.csv"))


def test_progress_partial_polls_while_building_and_stops_when_published(client, project, manager, mast_version):
    closed_round(project, mast_version, {make_trace(project): {"1.1"}})
    release = release_create(project=project, by=manager, enqueue=False)
    client.force_login(manager)
    url = reverse("annotations:release_progress", kwargs={"slug": project.slug, "number": release.number})
    building = client.get(url).content.decode()
    assert 'hx-trigger="every 1s"' in building and 'role="progressbar"' in building
    release_build(release_id=release.pk)
    done = client.get(url).content.decode()
    assert "hx-trigger" not in done and "Download zip" in done
