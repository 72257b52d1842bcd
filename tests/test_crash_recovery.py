"""Crashes beyond a killed worker: every job and every save survives them (issue 27).

tests/test_job_recovery.py kills the worker (kill -9) in the middle of an import, a release build
and an LLM judge run. Here, with real processes on the test database:

* the worker killed in the middle of a baseline judge run;
* the database dropping the worker's connections in the middle of each kind of job (an import, a
  release build, an LLM judge run, a baseline run);
* the broker (a private redis-server) restarted in the middle of each kind of job, losing its
  messages;
* a web process (gunicorn) killed in the middle of a labelling save and of a rater import.

To hold a job or a request at a known point in its transaction, the test takes a lock the
transaction will need next (a row, a table), waits until the process is blocked on it, crashes
the process, then lets go.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from annotations.judge.runs import judge_run_create
from annotations.models import Annotation, AnnotationEvent, JudgeItem, JudgeRun, ModeLabel, Rater, Release
from annotations.releases.services import release_create, release_dir
from tests.annotations.conftest import make_judge_traces
from tests.annotations.judge.test_judge_web import imported_labels
from tests.annotations.judge.test_judge_worker import wait_for
from tests.annotations.releases_factories import closed_round
from tests.annotations.releases_factories import make_trace as make_release_trace
from tests.annotations.workspace_factories import make_trace
from tests.llm_server import LLMServer, Reply, codes_of, good_answer
from tests.processes import WebProcess, free_port
from tests.test_job_recovery import DEMO_LOG, RECOVERY, WORKER_ENV, no_release_folders_left  # noqa: F401
from traces.importing.jobs import import_job_create, import_job_progress
from traces.models import ImportJob, Trace

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture
def worker(monkeypatch, request):
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    return request.getfixturevalue("celery_worker_process")


def _pg():
    """A connection of the test's own beside Django's (psycopg, autocommit off): it holds the locks."""
    import psycopg

    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"],
        password=db["PASSWORD"] or None,
    )  # fmt: skip


@contextmanager
def _holding(sql: str, params=()):
    """Run `sql` (a SELECT ... FOR UPDATE, a LOCK TABLE) in a transaction held open for the with-block."""
    import psycopg

    conn = _pg()
    try:
        conn.execute(sql, params)
        yield conn
    finally:
        with contextlib.suppress(psycopg.OperationalError):  # dropped with the others by the test
            conn.rollback()
        conn.close()


def _blocked_backends() -> list[int]:
    """The pids of this database's server processes waiting for a lock."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND pid <> pg_backend_pid()"
        )
        return [r[0] for r in cur.fetchall()]


def _tables_written(pid: int) -> set[str]:
    """The tables the server process `pid` has written in its open transaction (granted RowExclusiveLock)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE l.pid = %s AND l.granted AND l.mode = 'RowExclusiveLock' AND c.relkind = 'r'",
            [pid],
        )
        return {r[0] for r in cur.fetchall()}


def _backend_alive(pid: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", [pid])
        return cur.fetchone()[0]


def _wait_blocked(what: str) -> int:
    assert wait_for(lambda: bool(_blocked_backends()), timeout=60, step=0.05), f"{what} never reached the held lock"
    return _blocked_backends()[0]


def _drop_database_connections() -> None:
    """The database goes away under the worker. PostgreSQL here is shared by other people's test
    runs, so by default the test terminates every other connection to ITS database
    (pg_terminate_backend), which is what a server restart does to the worker: its connections drop
    in the middle of a statement or a transaction, the advisory locks they held are released, and
    uncommitted work rolls back. With MAST_TEST_RESTART_SERVICES=1 it restarts the server itself."""
    if os.environ.get("MAST_TEST_RESTART_SERVICES") == "1":
        version = sorted(os.listdir("/etc/postgresql"))[-1]
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True)
        connection.close()
        return
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cur.fetchone()[0] >= 1, "the worker held no database connection to drop"


def _big_import(project, manager, n: int = 50, name: str = "big.json", copies: int = 100):
    log = DEMO_LOG.read_text()
    records = [
        {"mas_name": "OpenManus", "benchmark_name": "GAIA", "trace_id": i, "mast_annotation": {"1.3": 1},
         "trace": {"key": f"OpenManus_{name}", "index": i, "trajectory": f"{log}\n" * copies + f"{name} run {i}\n"}}
        for i in range(n)
    ]  # fmt: skip
    upload = SimpleUploadedFile(name, json.dumps(records).encode(), content_type="application/json")
    return import_job_create(project=project, by=manager, files=[upload])


def _progressed(job) -> bool:
    return import_job_progress(job=ImportJob.objects.get(pk=job.pk))["bytes_done"] > 0


# ---------------------------------------------------------------- worker killed: the baseline


@contextmanager
def _baseline_blocked(project, manager):
    """A baseline run of 24 traces started and held at its last trace (23 written in its open
    transaction); yields (run, traces) while it waits for the test's lock."""
    traces = make_judge_traces(project, 12, words="plain") + make_judge_traces(
        project, 12, words="crash traceback", start=50
    )
    imported_labels(project, traces, lambda t: "crash" in t.raw_text)
    run = judge_run_create(project=project, by=manager, provider="baseline", start=False)
    last = JudgeItem.objects.filter(run=run).order_by("-id").first()
    with _holding("SELECT id FROM annotations_judgeitem WHERE id = %s FOR UPDATE", [last.pk]):
        from annotations.judge.dispatch import CELERY

        CELERY.start(run.pk)
        _wait_blocked("the baseline's batch")  # 23 traces written, the 24th waits for our lock
        yield run, traces


def test_a_baseline_run_killed_midway_labels_each_trace_once_after_the_restart(worker, project, manager):
    """The baseline labels every trace in one task. Before its liveness lock, a run whose worker
    died was started again only after 10 silent minutes; now the sweep starts it again as soon as
    the run is running and its lock is free."""
    with _baseline_blocked(project, manager) as (run, traces):
        worker.kill()
    run.refresh_from_db()
    assert run.state == "running"
    assert not Annotation.objects.filter(rater__kind="baseline").exists()  # the dead batch rolled back

    started = time.monotonic()
    worker.start()
    assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY)
    print(f"baseline run recovered in {time.monotonic() - started:.1f} s after the restart")
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 24, 0)
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(t.pk for t in traces)


# ---------------------------------------------------------------- the database drops the worker


def test_an_import_whose_database_connection_drops_is_imported_whole(worker, project, manager):
    """A lost connection is not the import's fault: the attempt rolls back, the job is not failed
    with an 'internal error' but runs again (attempt 2) and imports every trace once."""
    job = _big_import(project, manager)
    assert wait_for(lambda: _progressed(job), timeout=60, step=0.05), "the import never started"
    _drop_database_connections()
    started = time.monotonic()
    assert wait_for(lambda: ImportJob.objects.get(pk=job.pk).status in ("done", "failed"), timeout=RECOVERY)
    print(f"import recovered in {time.monotonic() - started:.1f} s after the connections dropped")
    job.refresh_from_db()
    assert (job.status, job.error, job.attempts) == ("done", "", 2)
    assert Trace.objects.filter(project=project).count() == job.n_imported == 50


def _judge_run_survives(project, manager, crash, what: str) -> None:
    """A 16-trace LLM judge run, crashed (``crash()``) once four traces are labelled: it finishes
    within RECOVERY, each trace labelled once."""
    server = LLMServer(default=lambda body: Reply(good_answer(codes_of(body), codes_of(body)[:1]), delay=0.3)).start()
    try:
        traces = make_judge_traces(project, 16)
        run = judge_run_create(
            project=project, by=manager, provider="openai", base_url=server.url, model="k", concurrency=4, timeout=3
        )
        assert wait_for(lambda: JudgeRun.objects.get(pk=run.pk).n_done >= 4, timeout=60), "the run never started"
        crash()
        assert JudgeRun.objects.get(pk=run.pk).n_done < 16, f"the run finished before the {what}: make it slower"
        started = time.monotonic()
        assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY)
        print(f"judge run recovered in {time.monotonic() - started:.1f} s after the {what}")
    finally:
        server.stop()
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 16, 0)
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(t.pk for t in traces)


def test_a_judge_run_whose_database_connections_drop_labels_each_trace_once(worker, project, manager):
    _judge_run_survives(project, manager, _drop_database_connections, "connections dropped")


def _big_release(project, manager, version, n: int = 200):
    """A release of n traces of ~170 KB each, adjudicated: building it takes a few seconds."""
    text = "Coder: writes the code again, line by line\n" * 4000
    traces = [make_release_trace(project, raw_text=f"Planner: step {k}\n{text}") for k in range(n)]
    closed_round(project, version, {t: {"1.3"} for t in traces})
    return release_create(project=project, by=manager)


def _release_building(release) -> bool:
    r = Release.objects.get(pk=release.pk)
    return r.status != "queued" or r.n_done > 0


def _published_once(release, project) -> None:
    release.refresh_from_db()
    assert (release.status, release.number, release.error) == ("done", 1, "")
    assert Release.objects.filter(project=project).count() == 1
    final = release_dir(release=release)
    assert sorted(p.name for p in final.parent.iterdir()) == ["v1"]  # no v1.building left
    assert sorted(p.name for p in final.iterdir()) == sorted(release.files.values_list("name", flat=True))


def test_a_release_build_whose_database_connections_drop_is_published_once(worker, project, manager, mast_version):
    release = _big_release(project, manager, mast_version)
    assert wait_for(lambda: _release_building(release), timeout=60, step=0.05), "the build never started"
    _drop_database_connections()
    assert Release.objects.get(pk=release.pk).status == "running", "the build finished before the drop: make it bigger"
    started = time.monotonic()
    assert wait_for(lambda: Release.objects.get(pk=release.pk).status in ("done", "failed"), timeout=RECOVERY)
    print(f"release recovered in {time.monotonic() - started:.1f} s after the connections dropped")
    _published_once(release, project)
    assert Release.objects.get(pk=release.pk).attempts == 2


def test_a_baseline_run_whose_database_connections_drop_labels_each_trace_once(worker, project, manager):
    with _baseline_blocked(project, manager) as (run, traces):
        _drop_database_connections()
    started = time.monotonic()
    assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY)
    print(f"baseline run recovered in {time.monotonic() - started:.1f} s after the connections dropped")
    run.refresh_from_db()
    assert (run.state, run.n_done, run.n_failed) == ("done", 24, 0)
    labelled = sorted(Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True))
    assert labelled == sorted(t.pk for t in traces)


# ---------------------------------------------------------------- the broker restarts


class _Redis:
    """A private redis-server, no persistence: a restart loses every message, as a crash would."""

    def __init__(self):
        if not shutil.which("redis-server"):
            pytest.fail("redis-server not found: install Debian's redis-server")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def private_broker(settings, monkeypatch):
    """The test's own Redis, for this process (it sends the tasks) and the worker (the caller
    restarts it on this broker). Celery reads the CELERY_BROKER_URL environment variable before
    its configuration (conftest sets it per xdist worker), so the variable is what moves."""
    from mast_site.celery import app

    redis = _Redis()
    redis.start()
    monkeypatch.setenv("CELERY_BROKER_URL", redis.url)
    settings.CELERY_BROKER_URL = redis.url
    app._pool, app.amqp._producer_pool = None, None  # the next send connects to the new broker
    assert app.conf.broker_url == redis.url
    yield redis
    monkeypatch.undo()
    app._pool, app.amqp._producer_pool = None, None
    redis.kill()


def test_imports_survive_a_broker_restart_that_loses_their_messages(worker, private_broker, project, manager):
    """One import runs while a second waits in Redis; Redis restarts with nothing. The running one
    finishes (its results go to PostgreSQL); the worker reconnects and sweeps, sending the queued
    job's lost task again. Before, the worker dropped its sweeps' countdowns with the connection,
    and the second import stayed queued."""
    worker.stop()
    worker.env["CELERY_BROKER_URL"] = private_broker.url
    worker.start(concurrency=1)
    first = _big_import(project, manager, n=30, name="first.json")
    assert wait_for(lambda: _progressed(first), timeout=60, step=0.05), "the import never started"
    second = _big_import(project, manager, n=5, name="second.json", copies=1)  # waits in Redis: one thread
    private_broker.kill()
    private_broker.start()
    assert ImportJob.objects.get(pk=second.pk).status == "queued"
    started = time.monotonic()
    done = ("done", "failed")
    assert wait_for(lambda: ImportJob.objects.get(pk=second.pk).status in done, timeout=RECOVERY), "lost in Redis"
    assert wait_for(lambda: ImportJob.objects.get(pk=first.pk).status in done, timeout=RECOVERY)
    print(f"imports recovered in {time.monotonic() - started:.1f} s after the broker restart")
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.status, first.n_imported, second.status, second.n_imported) == ("done", 30, "done", 5)
    assert Trace.objects.filter(project=project).count() == 35


def _on_private_broker(worker, broker, concurrency: int = 4) -> None:
    worker.stop()
    worker.env["CELERY_BROKER_URL"] = broker.url
    worker.start(concurrency=concurrency)


def test_a_judge_run_survives_a_broker_restart_that_loses_its_messages(worker, private_broker, project, manager):
    """The run's claimed items were messages in Redis; the restart loses them. The items' leases
    run out and the judge sweep (sent again when the worker reconnects) claims them again."""
    _on_private_broker(worker, private_broker)

    def restart() -> None:
        private_broker.kill()
        private_broker.start()

    _judge_run_survives(project, manager, restart, "broker restart")


def test_release_builds_survive_a_broker_restart_that_loses_their_messages(
    worker, private_broker, project, manager, mast_version
):
    """One build runs while a second waits in Redis (one worker thread); Redis restarts empty. The
    running one is published; the queued one's lost task is sent again on the reconnect."""
    _on_private_broker(worker, private_broker, concurrency=1)
    first = _big_release(project, manager, mast_version)
    assert wait_for(lambda: _release_building(first), timeout=60, step=0.05), "the build never started"
    second = release_create(project=project, by=manager, title="the second")  # same labels: a new title
    private_broker.kill()
    private_broker.start()
    assert Release.objects.get(pk=second.pk).status == "queued"
    started = time.monotonic()
    done = ("done", "failed")
    assert wait_for(lambda: Release.objects.get(pk=second.pk).status in done, timeout=RECOVERY), "lost in Redis"
    assert wait_for(lambda: Release.objects.get(pk=first.pk).status in done, timeout=RECOVERY)
    print(f"releases recovered in {time.monotonic() - started:.1f} s after the broker restart")
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.status, first.number, second.status, second.number) == ("done", 1, "done", 2)
    assert sorted(p.name for p in release_dir(release=second).parent.iterdir()) == ["v1", "v2"]


def test_a_queued_baseline_run_survives_a_broker_restart_that_loses_its_message(
    worker, private_broker, project, manager
):
    """The baseline's one start task waits in Redis behind an import (one worker thread); Redis
    restarts empty. The judge sweep the worker sends when it reconnects starts the queued run."""
    _on_private_broker(worker, private_broker, concurrency=1)
    job = _big_import(project, manager, n=30, name="busy.json")
    assert wait_for(lambda: _progressed(job), timeout=60, step=0.05), "the import never started"
    traces = make_judge_traces(project, 12, words="plain") + make_judge_traces(
        project, 12, words="crash traceback", start=50
    )
    imported_labels(project, traces, lambda t: "crash" in t.raw_text)
    run = judge_run_create(project=project, by=manager, provider="baseline")  # its task waits in Redis
    private_broker.kill()
    private_broker.start()
    assert JudgeRun.objects.get(pk=run.pk).n_done == 0
    started = time.monotonic()
    assert wait_for(lambda: not JudgeRun.objects.get(pk=run.pk).is_active, timeout=RECOVERY), "lost in Redis"
    print(f"baseline run recovered in {time.monotonic() - started:.1f} s after the broker restart")
    run.refresh_from_db()
    # the run covers the project's traces when it was created: ours, and those of the import
    # that has finished by then
    assert {t.pk for t in traces} <= set(run.trace_ids)
    assert (run.state, run.n_done, run.n_failed) == ("done", run.n_total, 0)
    labelled = Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True)
    assert sorted(labelled) == sorted(run.trace_ids)  # each once


# ---------------------------------------------------------------- a web process killed mid-request


@pytest.fixture
def web(transactional_db):
    server = WebProcess()
    yield server
    server.kill()


def _token(user) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


def _in_thread(fn):
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except Exception as e:  # noqa: BLE001 - the request dies with the server: that is the point
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _wait_gone(pid: int) -> None:
    assert wait_for(lambda: not _backend_alive(pid), timeout=30), "the killed request's transaction lives on"


def _state(revision, labels, task_success="no", notes=""):
    return {"revision": revision, "labels": labels, "task_success": task_success, "notes": notes, "open_codes": []}


def _lab(code, decision="present", rationale=""):
    return {"code": code, "decision": decision, "evidence": [], "rationale": rationale}


def _stored(annotation_id):
    ann = Annotation.objects.get(pk=annotation_id)
    rows = ModeLabel.objects.filter(annotation_id=annotation_id).select_related("mode")
    labels = sorted((r.mode.code, r.decision, r.rationale) for r in rows)
    return ann.revision, ann.task_success, ann.notes, labels, AnnotationEvent.objects.filter(annotation=ann).count()


def test_a_web_process_killed_in_the_middle_of_a_save_leaves_the_last_whole_save(web, project, annotator):
    """A save is one transaction: killed after some of its statements ran, none of them is kept.
    The test holds the annotation events table, so the save stops at its history entry with its
    label rows already written, then kills gunicorn. The product already recovers (the database's
    atomicity); this documents it with the real process."""
    trace = make_trace(project, n_steps=4)
    token = _token(annotator)
    path = f"/api/projects/{project.slug}/traces/{trace.pk}/annotation/"
    first = _state(0, [_lab("1.1", rationale="first"), _lab("1.2", "absent")])
    status, body = web.request("PUT", path, token, json.dumps(first).encode(), "application/json")
    assert status == 200, body
    before = _stored(body["id"])

    second = _state(body["revision"], [_lab("1.1", "absent", "second"), _lab("2.1")], "yes", notes="half?")
    with _holding("LOCK TABLE annotations_annotationevent IN SHARE MODE"):
        thread, out = _in_thread(
            lambda: web.request("PUT", path, token, json.dumps(second).encode(), "application/json")
        )
        pid = _wait_blocked("the save")
        assert {"annotations_annotation", "annotations_modelabel"} <= _tables_written(pid)  # half written
        web.kill()
    thread.join(10)
    assert "error" in out, f"the save answered although its server was killed: {out}"
    _wait_gone(pid)
    assert _stored(body["id"]) == before  # not one of the second save's writes was kept


def test_a_web_process_killed_in_the_middle_of_a_rater_import_stores_nothing(web, project, manager):
    """A rater import (annotations/judge/imported.py) runs in the request, all or nothing, in one
    transaction. Killed after the rater and the first annotations were written, it leaves no rater
    and no label."""
    traces = make_judge_traces(project, 40)
    for t in traces:
        Trace.objects.filter(pk=t.pk).update(external_id=f"src-{t.pk}")
    lines = "\n".join(json.dumps({"source_id": f"src-{t.pk}", "modes": {"1.1": True, "2.1": False}}) for t in traces)
    content = json.dumps({"name": "lab B", "content": lines, "filename": "lab-b.jsonl", "format": "auto"})
    path = f"/api/projects/{project.slug}/imported-raters/"
    token = _token(manager)
    with _holding("LOCK TABLE annotations_modelabel IN SHARE MODE"):
        thread, out = _in_thread(lambda: web.request("POST", path, token, content.encode(), "application/json"))
        pid = _wait_blocked("the rater import")
        assert {"annotations_rater", "annotations_annotation"} <= _tables_written(pid)  # half written
        web.kill()
    thread.join(10)
    assert "error" in out, f"the import answered although its server was killed: {out}"
    _wait_gone(pid)
    assert not Rater.objects.filter(name="lab B").exists()
    assert not Annotation.objects.filter(rater__kind="imported").exists()
