"""kill -9 of the worker in the middle of each kind of job, then a restart: nothing stays stuck.

A real Celery worker process on PostgreSQL and Redis (conftest's celery_worker_process). Each test
starts a job big or slow enough to be surely running, SIGKILLs the worker's process group, checks
that the database holds none of the dead attempt's work, starts a worker again and expects the job
finished within RECOVERY seconds: by the job sweep (traces/jobs.py) for imports and releases, by
the judge's leases and judge_sweep (annotations/judge/) for judge runs.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.judge.runs import judge_run_create
from annotations.models import Annotation, JudgeRun, Release
from annotations.releases.services import release_create, release_dir
from tests.annotations.conftest import make_judge_traces
from tests.annotations.judge.test_judge_worker import wait_for
from tests.annotations.releases_factories import closed_round, make_trace
from tests.llm_server import LLMServer, Reply, codes_of, good_answer
from traces.importing.jobs import import_job_create, import_job_progress
from traces.models import ImportJob, Trace

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RECOVERY = 60.0  # seconds from the restart to the finished job
DEMO_LOG = Path(__file__).resolve().parents[1] / "traces" / "demo_data" / "openmanus" / "demo_openmanus.log"


# The worker is another process: it reads these from the environment. Short judge leases, so the
# traces the killed worker held are claimed again within seconds.
WORKER_ENV = {"MAST_JUDGE_LEASE_SLACK": "3", "MAST_JUDGE_BACKOFF_BASE": "0.05", "MAST_JOB_SWEEP_SECONDS": "2"}


@pytest.fixture
def worker(monkeypatch, request):
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    return request.getfixturevalue("celery_worker_process")


@pytest.fixture(autouse=True)
def no_release_folders_left(settings, project):
    """Releases live under MEDIA_ROOT/releases/<project slug>/, shared by the tests of one xdist
    worker: each test here starts and ends without any."""
    folder = Path(settings.MEDIA_ROOT) / "releases" / project.slug
    shutil.rmtree(folder, ignore_errors=True)
    yield
    shutil.rmtree(folder, ignore_errors=True)


def _restart(worker) -> float:
    worker.start()
    return time.monotonic()


def test_an_import_killed_midway_is_imported_whole_after_the_restart(worker, project, manager):
    log = DEMO_LOG.read_text()
    records = [
        {"mas_name": "OpenManus", "benchmark_name": "GAIA", "trace_id": i, "mast_annotation": {"1.3": 1},
         "trace": {"key": "OpenManus_GAIA", "index": i, "trajectory": f"{log}\n" * 100 + f"run {i}\n"}}
        for i in range(50)
    ]  # fmt: skip
    upload = SimpleUploadedFile("big.json", json.dumps(records).encode(), content_type="application/json")
    job = import_job_create(project=project, by=manager, files=[upload])

    def progressed() -> bool:
        return import_job_progress(job=ImportJob.objects.get(pk=job.pk))["bytes_done"] > 0

    assert wait_for(progressed, timeout=60, step=0.05), "the import never started"
    worker.kill()
    assert ImportJob.objects.get(pk=job.pk).status == "running", "the import finished before the kill: make it bigger"
    assert Trace.objects.filter(project=project).count() == 0  # the dead attempt rolled back

    started = _restart(worker)
    assert wait_for(lambda: ImportJob.objects.get(pk=job.pk).status in ("done", "failed"), timeout=RECOVERY)
    print(f"import recovered in {time.monotonic() - started:.1f} s after the restart")
    job.refresh_from_db()
    assert (job.status, job.error, job.attempts) == ("done", "", 2)
    assert Trace.objects.filter(project=project).count() == job.n_imported == 50


def test_a_release_killed_while_building_is_published_once_after_the_restart(worker, project, manager, mast_version):
    text = "Coder: writes the code again, line by line\n" * 4000
    traces = [make_trace(project, raw_text=f"Planner: step {k}\n{text}") for k in range(200)]
    closed_round(project, mast_version, {t: {"1.3"} for t in traces})
    release = release_create(project=project, by=manager)

    def building() -> bool:
        r = Release.objects.get(pk=release.pk)
        return r.status != "queued" or r.n_done > 0

    assert wait_for(building, timeout=60, step=0.05), "the build never started"
    worker.kill()
    assert Release.objects.get(pk=release.pk).status == "running", "the build finished before the kill: make it bigger"

    started = _restart(worker)
    assert wait_for(lambda: Release.objects.get(pk=release.pk).status in ("done", "failed"), timeout=RECOVERY)
    print(f"release recovered in {time.monotonic() - started:.1f} s after the restart")
    release.refresh_from_db()
    assert (release.status, release.number, release.attempts) == ("done", 1, 2)
    assert Release.objects.filter(project=project).count() == 1
    final = release_dir(release=release)
    assert sorted(p.name for p in final.parent.iterdir()) == ["v1"]  # no v1.building left
    on_disk = sorted(p.name for p in final.iterdir())
    assert on_disk == sorted(release.files.values_list("name", flat=True)) and "manifest.json" in on_disk


def test_a_judge_run_killed_midway_labels_each_trace_once_after_the_restart(worker, project, manager):
    server = LLMServer(default=lambda body: Reply(good_answer(codes_of(body), codes_of(body)[:1]), delay=0.4)).start()
    try:
        traces = make_judge_traces(project, 20)
        run = judge_run_create(
            project=project, by=manager, provider="openai", base_url=server.url, model="k", concurrency=4, timeout=3
        )
        assert wait_for(lambda: JudgeRun.objects.get(pk=run.pk).n_done >= 4, timeout=60), "the run never started"
        worker.kill()
        assert JudgeRun.objects.get(pk=run.pk).n_done < 20, "the run finished before the kill: make it slower"

        started = _restart(worker)
        assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY)
        print(f"judge run recovered in {time.monotonic() - started:.1f} s after the restart")
    finally:
        server.stop()
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 20, 0)
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(t.pk for t in traces)  # one label per trace


def test_a_judge_run_with_a_long_request_timeout_recovers_within_a_minute(worker, project, manager):
    """A request may take the run's whole timeout (120 s here), and an item's lease used to be as
    long: a killed worker's traces waited two minutes. A started item is leased for three
    heartbeats and renewed by the worker while the model answers, so the dead worker's traces are
    claimed again within seconds, and a live worker's answer slower than the lease is never asked
    twice."""
    worker.stop()
    worker.env["MAST_JUDGE_HEARTBEAT"] = "0.5"  # a started item's lease: 3 x 0.5 s + the slack (3 s)
    worker.start()
    server = LLMServer(default=lambda body: Reply(good_answer(codes_of(body), codes_of(body)[:1]), delay=8)).start()
    try:
        traces = make_judge_traces(project, 8)
        run = judge_run_create(
            project=project, by=manager, provider="openai", base_url=server.url, model="k", concurrency=4, timeout=120
        )
        assert wait_for(lambda: server.n_requests >= 4, timeout=60), "the run never started"
        time.sleep(6.5)  # the 8 s answers outlive their 4.5 s lease: only the heartbeat keeps them
        assert (server.n_requests, JudgeRun.objects.get(pk=run.pk).n_done) == (4, 0), "a trace was asked twice"
        assert wait_for(lambda: server.n_requests == 8, timeout=30), "the second four were never asked"
        time.sleep(1)
        worker.kill()  # in the middle of the second four answers
        assert JudgeRun.objects.get(pk=run.pk).n_done == 4

        started = _restart(worker)
        assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY)
        print(f"judge run (120 s timeout) recovered in {time.monotonic() - started:.1f} s after the restart")
    finally:
        server.stop()
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 8, 0)
    assert server.n_requests == 12  # the four the dead worker was waiting for, asked again once
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(t.pk for t in traces)
