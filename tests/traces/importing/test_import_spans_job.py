"""Span files uploaded as a background import job, run by a REAL Celery worker (Redis broker)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.traces.importing.test_import_job import _wait
from traces.importing.jobs import import_job_create
from traces.models import Step, Trace

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_span_uploads_import_in_the_worker_with_their_tree(celery_worker_process, project, manager, import_fixtures):
    files = [
        SimpleUploadedFile(name, (import_fixtures / name).read_bytes())
        for name in ("phoenix_spans.jsonl", "openai_agents_trace.json")
    ]
    total = sum(f.size for f in files)

    job = import_job_create(project=project, by=manager, files=files)
    job, _seen = _wait(job.pk)

    assert job.status == "done", job.error
    assert (job.n_imported, job.bytes_done) == (3, total)
    assert sorted(Trace.objects.filter(import_job=job).values_list("format", flat=True)) == [
        "openai_agents",
        "openinference",
        "openinference",
    ]
    assert Step.objects.filter(trace__import_job=job, parent_index__isnull=False).count() > 20


def test_a_span_upload_without_content_fails_in_the_worker_and_stores_nothing(celery_worker_process, project, manager):
    empty = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "t", "spanId": "s", "name": "GET /"}]}]}]}\n'
    job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("health.jsonl", empty)])
    job, _seen = _wait(job.pk)

    assert job.status == "failed"
    assert job.error.startswith("health.jsonl, record 1: otlp: trace t: no content in its 1 span(s)")
    assert Trace.objects.count() == 0
