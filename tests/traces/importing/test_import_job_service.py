"""import_job_create / import_job_run without a worker: files on disk, idempotency, recovery."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from traces.importing.jobs import import_job_create, import_job_run
from traces.models import ImportJob, Trace

pytestmark = pytest.mark.django_db


def _zip_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in folder.rglob("*"):
            if path.is_file():
                zf.write(path, path.relative_to(folder))
    return buf.getvalue()


def test_uploaded_files_are_saved_under_media_imports_with_safe_names(project, manager, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    evil = SimpleUploadedFile("../../etc/passwd.log", b"hello\n")
    twin = SimpleUploadedFile("passwd.log", b"other\n")

    job = import_job_create(project=project, by=manager, files=[evil, twin])

    folder = tmp_path / "imports" / str(job.pk)
    assert job.upload_dir == f"imports/{job.pk}"
    assert job.file_names == ["passwd.log", "passwd-2.log"]
    assert sorted(p.name for p in folder.iterdir()) == ["passwd-2.log", "passwd.log"]
    assert job.bytes_total == 12


def test_a_zip_upload_runs_to_done_and_removes_the_uploaded_files(project, manager, demo_data, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("demo.zip", _zip_of(demo_data), content_type="application/zip")
    job = import_job_create(project=project, by=manager, files=[upload])

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.n_imported, job.n_duplicates) == ("done", 10, 0)
    assert job.finished_at is not None
    assert not (Path(settings.MEDIA_ROOT) / job.upload_dir).exists()
    assert Trace.objects.filter(import_job=job).count() == 10


def test_running_a_finished_job_again_changes_nothing(project, manager, demo_data, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("run.json", (demo_data / "metagpt" / "run_demo_7.json").read_bytes())
    job = import_job_create(project=project, by=manager, files=[upload])
    first = import_job_run(job_id=job.pk)

    again = import_job_run(job_id=job.pk)  # a redelivered message

    assert (again.status, again.n_imported, again.finished_at) == ("done", 1, first.finished_at)
    assert Trace.objects.count() == 1


def test_a_job_left_running_by_a_dead_worker_runs_again_whole(project, manager, demo_data, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("run.json", (demo_data / "metagpt" / "run_demo_7.json").read_bytes())
    job = import_job_create(project=project, by=manager, files=[upload])
    ImportJob.objects.filter(pk=job.pk).update(status="running")  # the worker died mid-import: nothing committed

    job = import_job_run(job_id=job.pk)

    assert (job.status, job.n_imported) == ("done", 1)
