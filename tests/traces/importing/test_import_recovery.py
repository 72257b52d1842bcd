"""Import jobs whose worker died (traces/jobs.py), without a worker: the sweep, the lock, retry, kept uploads."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from traces.importing.jobs import IMPORT_JOBS, _progress_name, import_job_create, import_job_run
from traces.jobs import job_lock, job_lock_held, jobs_sweep
from traces.models import ImportJob, Trace

pytestmark = pytest.mark.django_db

STOPPED = "the worker stopped 3 times while importing; retry, or import smaller files"


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.VAR_DIR = tmp_path / "var"
    return settings.MEDIA_ROOT


@pytest.fixture
def make_job(project, manager, demo_data, media, django_capture_on_commit_callbacks):
    def make(**fields) -> ImportJob:
        data = (demo_data / "metagpt" / "run_demo_7.json").read_bytes()
        with django_capture_on_commit_callbacks():  # no broker: the task is not sent
            job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("run.json", data)])
        ImportJob.objects.filter(pk=job.pk).update(**fields)
        job.refresh_from_db()
        return job

    return make


@contextlib.contextmanager
def lock_held_by_another_worker(pk: int):
    """The job's lock, taken on another database connection (another worker's, as far as PostgreSQL knows)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with job_lock(kind=IMPORT_JOBS, pk=pk) as held:
                assert held
                taken.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join(10)


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _stopped_job(make_job) -> ImportJob:
    return make_job(status="failed", failure="stopped", error="internal error: boom", finished_at=timezone.now())


def test_sweep_queues_again_a_running_job_whose_lock_is_free(make_job, django_capture_on_commit_callbacks):
    job = make_job(status="running", attempts=1)
    (Path(settings.MEDIA_ROOT) / _progress_name(job.pk)).write_text('{"bytes_done": 100}')

    with django_capture_on_commit_callbacks() as sent:
        still_active = jobs_sweep()

    job.refresh_from_db()
    assert (job.status, job.attempts, still_active) == ("queued", 1, True)
    assert len(sent) == 1  # the job's task, once
    # the page no longer shows the dead attempt's "30%"
    assert not (Path(settings.MEDIA_ROOT) / _progress_name(job.pk)).exists()


def test_sweep_leaves_alone_a_running_job_whose_lock_is_held(make_job, django_capture_on_commit_callbacks):
    job = make_job(status="running", attempts=1)

    with lock_held_by_another_worker(job.pk), django_capture_on_commit_callbacks() as sent:
        jobs_sweep()

    job.refresh_from_db()
    assert (job.status, job.attempts, len(sent)) == ("running", 1, 0)


def test_the_third_dead_attempt_marks_the_job_failed_with_a_retry(make_job, django_capture_on_commit_callbacks):
    job = make_job(status="running", attempts=3)

    with django_capture_on_commit_callbacks() as sent:
        jobs_sweep()

    job.refresh_from_db()
    assert (job.status, job.failure, job.error, len(sent)) == ("failed", "stopped", STOPPED, 0)
    assert job.finished_at is not None and job.can_retry
    assert (Path(settings.MEDIA_ROOT) / job.upload_dir).is_dir()  # kept for the retry


def test_a_job_queued_for_long_is_sent_again(make_job, settings, django_capture_on_commit_callbacks):
    settings.MAST_JOB_QUEUED_RESEND_SECONDS = 60
    old = make_job(queued_at=timezone.now() - timedelta(minutes=2))
    fresh = make_job()

    with django_capture_on_commit_callbacks() as sent:
        jobs_sweep()

    assert len(sent) == 1
    old.refresh_from_db()
    assert old.status == "queued" and old.queued_at > fresh.queued_at
    assert ImportJob.objects.get(pk=fresh.pk).queued_at == fresh.queued_at


def test_a_duplicate_delivery_that_cannot_take_the_lock_does_nothing(make_job):
    job = make_job()

    with lock_held_by_another_worker(job.pk):
        import_job_run(job_id=job.pk)

    job.refresh_from_db()
    assert (job.status, job.attempts, Trace.objects.count()) == ("queued", 0, 0)


def test_a_delivery_of_a_job_whose_attempts_are_used_up_fails_it(make_job):
    job = make_job(status="running", attempts=3)  # redelivered before any sweep saw the third death

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.error, Trace.objects.count()) == ("failed", STOPPED, 0)


def test_a_run_counts_its_attempt_and_frees_the_lock(make_job):
    job = make_job()

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.attempts) == ("done", 1)
    assert not job_lock_held(kind=IMPORT_JOBS, pk=job.pk)


# ---------------------------------------------------------------- uploads of failed jobs


def test_a_refused_upload_is_deleted_at_once_and_cannot_be_retried(project, manager, media, client):
    job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("bad.json", b"[{")])

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.failure, job.can_retry) == ("failed", "refused", False)
    assert not (Path(settings.MEDIA_ROOT) / job.upload_dir).exists()
    client.force_login(manager)
    html = client.get(reverse("import_job_detail", args=[project.slug, job.pk])).content.decode()
    assert "The upload was refused, so it has been deleted" in html and "Retry" not in html


def test_an_import_that_crashed_keeps_its_upload_and_offers_retry(project, manager, media, client, monkeypatch):
    import traces.importing.jobs as jobs

    def crash(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(jobs, "traces_import", crash)
    job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("ok.log", b"hello\n")])

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.failure, job.can_retry) == ("failed", "stopped", True)
    assert (Path(settings.MEDIA_ROOT) / job.upload_dir).is_dir()
    client.force_login(manager)
    html = client.get(reverse("import_job_detail", args=[project.slug, job.pk])).content.decode()
    assert "the files were not at fault" in html and "The upload is kept until" in html
    assert reverse("import_job_retry", args=[project.slug, job.pk]) in html


def test_the_sweep_deletes_kept_uploads_after_the_keep_time(make_job, settings, client, manager, project):
    settings.MAST_IMPORT_KEEP_FAILED_HOURS = 24
    old = make_job(status="failed", failure="stopped", finished_at=timezone.now() - timedelta(hours=25))
    recent = _stopped_job(make_job)

    jobs_sweep()

    old.refresh_from_db()
    recent.refresh_from_db()
    assert (old.upload_dir, old.can_retry) == ("", False)
    assert not (Path(settings.MEDIA_ROOT) / "imports" / str(old.pk)).exists()
    assert recent.can_retry and (Path(settings.MEDIA_ROOT) / recent.upload_dir).is_dir()
    client.force_login(manager)
    html = client.get(reverse("import_job_detail", args=[project.slug, old.pk])).content.decode()
    assert "The upload has been deleted since: upload the files again." in html


def test_the_sweep_removes_the_upload_of_a_request_that_died_before_committing(
    make_job, settings, project, manager, media
):
    """A web process killed while it stores an upload rolls its job row back, but the files it
    wrote stay: the sweep removes such a folder once nothing in it changed for a while (a request
    still writing has no visible job either), and never a folder whose job exists."""
    from django.db import transaction

    live = make_job()

    def dead_request(name: str) -> Path:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile(name, b"hello\n")])
            raise RuntimeError("the process dies before the commit")
        assert not ImportJob.objects.filter(pk=job.pk).exists()
        return (Path(settings.MEDIA_ROOT) / job.upload_dir)

    folder = dead_request("orphan.log")
    assert (folder / "orphan.log").is_file()  # the half-stored upload the issue warns of
    settings.MAST_IMPORT_ORPHAN_MINUTES = 60
    jobs_sweep()
    assert folder.is_dir()  # changed a moment ago: it may still be a request writing it

    settings.MAST_IMPORT_ORPHAN_MINUTES = 0
    jobs_sweep()
    assert not folder.exists()
    assert (Path(settings.MEDIA_ROOT) / live.upload_dir).is_dir() and ImportJob.objects.filter(pk=live.pk).exists()


# ---------------------------------------------------------------- retry


def test_manager_retries_a_failed_import_through_the_api(make_job, manager, django_capture_on_commit_callbacks):
    job = _stopped_job(make_job)
    ImportJob.objects.filter(pk=job.pk).update(attempts=3)

    with django_capture_on_commit_callbacks() as sent:
        response = _api(manager).post(f"/api/projects/{job.project.slug}/imports/{job.pk}/retry/")

    assert response.status_code == 202, response.data
    assert (response.data["id"], response.data["status"], response.data["attempts"]) == (job.pk, "queued", 0)
    assert len(sent) == 1
    job.refresh_from_db()
    assert (job.error, job.failure, job.finished_at) == ("", "", None)


def test_retried_import_runs_to_done(make_job, django_capture_on_commit_callbacks):
    from traces.importing.jobs import import_job_retry

    job = _stopped_job(make_job)
    with django_capture_on_commit_callbacks():
        import_job_retry(job=job)

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.n_imported) == ("done", 1)


def test_annotator_cannot_retry_an_import(make_job, annotator):
    job = _stopped_job(make_job)

    response = _api(annotator).post(f"/api/projects/{job.project.slug}/imports/{job.pk}/retry/")

    assert response.status_code == 403
    assert ImportJob.objects.get(pk=job.pk).status == "failed"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"status": "done"}, "not failed"),
        ({"status": "failed", "failure": "refused"}, "fix the file"),
        ({"status": "failed", "failure": "stopped", "upload_dir": ""}, "upload the files again"),
    ],
)
def test_retry_of_an_import_that_cannot_run_again_is_a_409_saying_why(make_job, manager, fields, says):
    job = make_job(**fields)

    response = _api(manager).post(f"/api/projects/{job.project.slug}/imports/{job.pk}/retry/")

    assert response.status_code == 409
    assert says in response.data["detail"]


def test_retry_button_on_the_job_page_queues_the_job(make_job, client, manager, django_capture_on_commit_callbacks):
    job = _stopped_job(make_job)
    client.force_login(manager)

    with django_capture_on_commit_callbacks() as sent:
        response = client.post(reverse("import_job_retry", args=[job.project.slug, job.pk]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("import_job_detail", args=[job.project.slug, job.pk])
    assert f"Import #{job.pk} is queued again." in response.content.decode()
    assert ImportJob.objects.get(pk=job.pk).status == "queued" and len(sent) == 1


def test_annotator_cannot_use_the_retry_button(make_job, client, annotator):
    job = _stopped_job(make_job)
    client.force_login(annotator)

    response = client.post(reverse("import_job_retry", args=[job.project.slug, job.pk]))

    assert response.status_code == 403
    assert ImportJob.objects.get(pk=job.pk).status == "failed"
