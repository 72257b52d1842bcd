"""The upload job in a REAL Celery worker (Redis broker): live progress, result, failure."""

from __future__ import annotations

import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.models import Annotation
from traces.importing.jobs import import_job_create, import_job_progress
from traces.models import ImportJob, Trace

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _mast_data(demo_data, n_records: int = 60, repeat: int = 120) -> bytes:
    """A MAST-Data array of about n_records x 0.5 MB, every record different."""
    log = (demo_data / "openmanus" / "demo_openmanus.log").read_text()
    records = [
        {
            "mas_name": "OpenManus",
            "llm_name": "GPT-4o",
            "benchmark_name": "GAIA",
            "trace_id": i,
            "trace": {"key": "OpenManus_GAIA", "index": i, "trajectory": f"{log}\n" * repeat + f"run {i}\n"},
            "mast_annotation": {"1.3": 1, "3.1": 0},
        }
        for i in range(n_records)
    ]
    return json.dumps(records).encode()


def _wait(job_id: int, timeout: float = 90) -> tuple[ImportJob, list[tuple[str, int]]]:
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = ImportJob.objects.get(pk=job_id)
        figures = import_job_progress(job=job)
        seen.append((job.status, figures["percent"]))
        if figures["finished"]:
            return job, seen
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s; seen {seen[-5:]}")


def test_upload_job_runs_in_the_worker_showing_progress_until_done(celery_worker_process, project, manager, demo_data):
    data = _mast_data(demo_data)
    upload = SimpleUploadedFile("big_mad.json", data, content_type="application/json")

    job = import_job_create(project=project, by=manager, files=[upload])
    job, seen = _wait(job.pk)

    assert job.status == "done", job.error
    assert (job.n_imported, job.n_duplicates, job.bytes_done) == (60, 0, len(data))
    running = [percent for status, percent in seen if status == "running"]
    assert any(0 < p < 100 for p in running), f"no intermediate progress seen: {seen}"
    assert running == sorted(running)  # progress only moves forward
    assert Trace.objects.filter(project=project, import_job=job).count() == 60
    assert Annotation.objects.filter(trace__project=project, rater__name="MAST-Data judge").count() == 60


def test_a_bad_upload_fails_in_the_worker_with_the_error_and_stores_nothing(
    celery_worker_process, project, manager, demo_data
):
    good = SimpleUploadedFile("good.log", (demo_data / "openmanus" / "demo_openmanus.log").read_bytes())
    bad = SimpleUploadedFile("zz_bad.jsonl", b'{"mas_name": "AG2", "trace": {"trajectory": "x"}}\n{"mas_name": \n')

    job = import_job_create(project=project, by=manager, files=[good, bad])
    job, _ = _wait(job.pk)

    assert job.status == "failed"
    assert job.error.startswith("zz_bad.jsonl, record 2, line 2: invalid JSON")
    assert Trace.objects.count() == 0
