"""Release builds whose worker died (traces/jobs.py), without a worker: the sweep, repeated requests, retry."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.models import Release, ReleaseFile
from annotations.releases.services import RELEASE_JOBS, release_build, release_create, release_dir
from tests.annotations.releases_factories import annotate, decisions, human_rater, make_trace
from traces.jobs import job_lock, jobs_sweep

pytestmark = pytest.mark.django_db

STOPPED = "the worker stopped 3 times while building this release"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def release(project, mast_version, manager, annotator):
    """A release whose build was running when its worker died: half its files on disk."""
    for _ in range(2):
        annotate(make_trace(project), human_rater(annotator), mast_version, decisions(mast_version, {"1.3"}))
    release = release_create(project=project, by=manager, enqueue=False)
    Release.objects.filter(pk=release.pk).update(status="running", attempts=1, n_total=2, n_done=1)
    final = release_dir(release=release)
    building = final.with_name(final.name + ".building")
    building.mkdir(parents=True)
    (building / "part.jsonl").write_text("{}\n")
    final.mkdir()  # renamed just before the worker died, its rows never written
    release.refresh_from_db()
    return release


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _folders(release: Release) -> list[str]:
    return sorted(p.name for p in release_dir(release=release).parent.iterdir())


def test_sweep_removes_the_partial_build_and_queues_the_same_release(release, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:
        jobs_sweep()

    release.refresh_from_db()
    assert (release.status, release.attempts, len(sent)) == ("queued", 1, 1)
    assert _folders(release) == []
    assert not ReleaseFile.objects.filter(release=release).exists()


def test_sweep_leaves_a_build_whose_lock_is_held_alone(release, django_capture_on_commit_callbacks):
    with job_lock(kind=RELEASE_JOBS, pk=release.pk), django_capture_on_commit_callbacks() as sent:
        jobs_sweep()

    release.refresh_from_db()
    assert (release.status, len(sent)) == ("running", 0)
    assert _folders(release) == ["v1", "v1.building"]


def test_the_third_dead_build_marks_the_release_failed(release):
    Release.objects.filter(pk=release.pk).update(attempts=3)

    jobs_sweep()

    release.refresh_from_db()
    assert release.status == "failed" and release.error.startswith(STOPPED)
    assert _folders(release) == []


def test_the_requeued_build_publishes_one_release_with_its_files(release, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        jobs_sweep()

    built = release_build(release_id=release.pk)

    assert (built.status, built.number, built.attempts, Release.objects.count()) == ("done", 1, 2, 1)
    assert built.files.filter(kind="zip").exists()
    assert _folders(release) == ["v1"]


def test_a_repeated_request_does_not_return_a_stuck_release(
    release, project, manager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as sent:
        again = release_create(project=project, by=manager)

    assert (again.pk, again.status, Release.objects.count()) == (release.pk, "queued", 1)
    assert len(sent) == 1  # its build is sent again
    assert _folders(release) == []


def test_a_repeated_request_does_not_return_a_failed_release(release, project, manager):
    Release.objects.filter(pk=release.pk).update(status="failed", error="boom")

    again = release_create(project=project, by=manager, enqueue=False)

    assert again.number == 2 and again.status == "queued"


def test_manager_retries_a_failed_release_through_the_api(release, manager, django_capture_on_commit_callbacks):
    Release.objects.filter(pk=release.pk).update(status="failed", error=STOPPED, attempts=3)

    with django_capture_on_commit_callbacks() as sent:
        response = _api(manager).post(f"/api/projects/{release.project.slug}/releases/{release.number}/retry/")

    assert response.status_code == 202, response.data
    assert (response.data["number"], response.data["status"], response.data["attempts"]) == (1, "queued", 0)
    assert response.data["error"] == "" and len(sent) == 1
    assert Release.objects.count() == 1


def test_retry_of_a_release_that_is_not_failed_is_a_409(release, manager):
    response = _api(manager).post(f"/api/projects/{release.project.slug}/releases/{release.number}/retry/")

    assert response.status_code == 409
    assert "not failed" in response.data["detail"]


def test_annotator_cannot_retry_a_release(release, annotator):
    Release.objects.filter(pk=release.pk).update(status="failed", error="boom")

    response = _api(annotator).post(f"/api/projects/{release.project.slug}/releases/{release.number}/retry/")

    assert response.status_code == 403
    assert Release.objects.get(pk=release.pk).status == "failed"


def test_release_list_offers_retry_to_managers_and_it_rebuilds(
    release, client, manager, django_capture_on_commit_callbacks
):
    Release.objects.filter(pk=release.pk).update(status="failed", error="boom")
    client.force_login(manager)
    url = reverse("annotations:release_retry", args=[release.project.slug, release.number])
    assert url in client.get(reverse("annotations:release_list", args=[release.project.slug])).content.decode()

    with django_capture_on_commit_callbacks() as sent:
        response = client.post(url, follow=True)

    assert "Release v1 is being built again." in response.content.decode()
    assert Release.objects.get(pk=release.pk).status == "queued" and len(sent) == 1


def test_release_list_offers_no_retry_to_annotators(release, client, annotator):
    Release.objects.filter(pk=release.pk).update(status="failed", error="boom")
    client.force_login(annotator)
    url = reverse("annotations:release_retry", args=[release.project.slug, release.number])

    assert url not in client.get(reverse("annotations:release_list", args=[release.project.slug])).content.decode()
    assert client.post(url).status_code == 403
    assert Path(release_dir(release=release)).exists()  # nothing was touched
