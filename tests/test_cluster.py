"""Many processes, no shared disk (issue 28): two web processes (gunicorn) and two Celery workers,
each with a private MEDIA_ROOT, temporary folder and var folder of its own, sharing only
PostgreSQL, Redis and an S3-protocol store (moto_server, a real process):

* an import uploaded through web A runs on a worker and its report shows through web B;
* a judge run spreads over both workers, one is killed mid-run, and the other finishes it with
  each trace labelled once;
* a release built by a worker downloads through web B, byte for byte the files its rows describe;

and at the end no process has left a file in its private folders.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from annotations.judge.runs import judge_run_create
from annotations.models import Annotation, JudgeRun, Release
from tests.annotations.conftest import make_judge_traces
from tests.annotations.judge.test_judge_worker import wait_for
from tests.annotations.releases_factories import closed_round, make_trace
from tests.conftest_paths import subprocess_database_url
from tests.llm_server import LLMServer, Reply, codes_of, good_answer
from tests.processes import ARTIFACTS, WebProcess, WorkerProcess, private_env
from tests.test_job_recovery import DEMO_LOG, WORKER_ENV
from traces.models import Trace

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _multipart(field: str, name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _last_received(log: Path, offset: int, task: str) -> str:
    """The log time of the last message of ``task`` the worker received after ``offset`` ("" if none)."""
    with log.open("rb") as fh:
        fh.seek(offset)
        lines = [line for line in fh.read().decode(errors="replace").splitlines() if f"Task {task}[" in line]
    return lines[-1][:25] if lines else ""


def _tasks_received(log: Path, offset: int, task: str) -> int:
    with log.open("rb") as fh:
        fh.seek(offset)
        return fh.read().count(f"Task {task}[".encode())


@pytest.fixture
def cluster(s3_storage, tmp_path, project):
    server, bucket, storage_url = s3_storage
    base = {**os.environ, **WORKER_ENV, "DATABASE_URL": subprocess_database_url()}
    base.update(CELERY_BROKER_URL=settings.CELERY_BROKER_URL, STORAGE_URL=storage_url)
    folders = {name: tmp_path / name for name in ("web-a", "web-b", "worker-1", "worker-2")}
    workers = []
    webs = []
    try:
        for name in ("worker-1", "worker-2"):
            worker = WorkerProcess(private_env(base, folders[name]), log=ARTIFACTS / f"cluster-{name}.log")
            if not workers:
                worker.purge()
            worker.start(name=name)
            workers.append(worker)
        for name in ("web-a", "web-b"):
            webs.append(WebProcess(private_env(base, folders[name]), log=ARTIFACTS / f"cluster-{name}.log"))
        yield {"webs": webs, "workers": workers, "folders": folders, "s3": (server, bucket)}
    finally:
        for process in [*webs]:
            process.kill()
        for process in workers:
            process.stop()


def _token(user) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


def test_two_webs_and_two_workers_share_only_the_database_redis_and_the_object_store(
    cluster, project, manager, mast_version
):
    web_a, web_b = cluster["webs"]
    workers = cluster["workers"]
    server, bucket = cluster["s3"]
    token = _token(manager)

    # An import uploaded through web A runs on a worker; its report shows through web B.
    body, content_type = _multipart("files", "demo_openmanus.log", DEMO_LOG.read_bytes())
    status, job = web_a.request("POST", f"/api/projects/{project.slug}/imports/", token, body, content_type)
    assert status == 202, job

    def import_done() -> bool:
        return web_b.request("GET", f"/api/projects/{project.slug}/imports/{job['id']}/", token)[1]["status"] in (
            "done",
            "failed",
        )

    assert wait_for(import_done, timeout=60, step=0.2), "the import never finished"
    _, seen = web_b.request("GET", f"/api/projects/{project.slug}/imports/{job['id']}/", token)
    assert (seen["status"], seen["n_imported"]) == ("done", 1), seen
    assert [(f["file"], f["status"], f["steps"]) for f in seen["report"]] == [("demo_openmanus.log", "imported", 16)]
    assert Trace.objects.filter(project=project, import_job_id=job["id"]).count() == 1
    assert server.keys(bucket) == []  # the upload is removed once stored

    # A judge run spreads over both workers; one dies mid-run; the other finishes it.
    offsets = [w.log.stat().st_size for w in workers]
    llm = LLMServer(default=lambda b: Reply(good_answer(codes_of(b), codes_of(b)[:1]), delay=0.3)).start()
    try:
        make_judge_traces(project, 24)
        run = judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm.url, model="k", concurrency=6, timeout=3
        )
        assert wait_for(lambda: JudgeRun.objects.get(pk=run.pk).n_done >= 6, timeout=60), "the run never started"
        pairs = zip(workers, offsets, strict=True)
        received = [_tasks_received(w.log, o, "annotations.prelabel_trace") for w, o in pairs]
        assert all(received), f"judge items received per worker: {received} (both should have some)"
        # Kill the worker holding the judge sweep's next countdown, if one does: the sweep must
        # still come back from the other (a backstop each worker sends, mast_site/celery.py).
        holding = [_last_received(w.log, o, "annotations.judge_sweep") for w, o in zip(workers, offsets, strict=True)]
        victim = workers[1] if holding[1] > holding[0] else workers[0]
        victim.kill()
        assert JudgeRun.objects.get(pk=run.pk).n_done < 25, "the run finished before the kill: make it slower"
        assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=90), "the run never finished"
    finally:
        llm.stop()
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 25, 0)  # 24 and the imported one
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(run.trace_ids)  # each trace once

    # A release built by a worker downloads through web B.
    released = [make_trace(project, raw_text=f"Planner: task {k}\nCoder: done {k}") for k in range(6)]
    closed_round(project, mast_version, {t: {"1.3"} for t in released})
    status, created = web_a.request(
        "POST", f"/api/projects/{project.slug}/releases/", token, json.dumps({"title": "cluster"}).encode()
    )
    assert status == 202, created
    number = created["number"]
    assert wait_for(
        lambda: Release.objects.get(project=project, number=number).status in ("done", "failed"), timeout=60
    )
    release = Release.objects.get(project=project, number=number)
    assert release.status == "done", release.error
    zip_row = release.files.get(kind="zip")
    status, data, headers = web_b.fetch("GET", f"/api/projects/{project.slug}/releases/{number}/download/", token)
    assert status == 200 and headers["Content-Type"] == "application/zip"
    assert (len(data), hashlib.sha256(data).hexdigest()) == (zip_row.size_bytes, zip_row.sha256)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert any(n.endswith("manifest.json") for n in zf.namelist())
    assert all(key.startswith(f"releases/{project.slug}/v{number}/") for key in server.keys(bucket))

    # Nothing on any process's own disk: every file went through the store.
    for name, folder in cluster["folders"].items():
        assert _files(folder) == [], f"{name} left files in its private folders"
