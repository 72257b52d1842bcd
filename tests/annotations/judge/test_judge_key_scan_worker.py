"""A stored connection key never leaves the server through a real worker's log or a release's files.

The unit tests in test_reasoning_and_connections.py scan responses, the in-process log and an
export; this one runs the judge in a real Celery worker (whose log is a file an operator reads and
ships) and builds a release, then reads every byte of both, zip members included.
"""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from annotations.judge.connections import connection_save
from annotations.judge.runs import judge_run_create
from annotations.models import JudgeRun
from annotations.releases.jobs import release_dir
from annotations.releases.services import release_build, release_create
from tests.annotations.conftest import make_judge_traces
from tests.llm_server import LLMServer

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

KEY = "sk-proj-WORKERSCAN-5a4b3c2d1e0f9876"


def _bytes_of(path) -> list[tuple[str, bytes]]:
    """Every file under ``path``, and every member of every zip among them."""
    out = []
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        data = f.read_bytes()
        out.append((str(f), data))
        if zipfile.is_zipfile(io.BytesIO(data)):
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                out.extend((f"{f}:{name}", zf.read(name)) for name in zf.namelist())
    return out


def test_the_key_is_in_no_worker_log_line_and_no_release_file(project, manager, celery_worker_process):
    server = LLMServer(reasoning=True, require_key=KEY).start()
    try:
        log_start = celery_worker_process.log.stat().st_size
        make_judge_traces(project, 3)
        conn = connection_save(
            project=project, by=manager, name="Scan", base_url=server.url, models=["lab-reasoner"], api_key=KEY
        )
        run = judge_run_create(
            project=project, by=manager, provider="openai", connection=conn, model="lab-reasoner", timeout=5
        )
        deadline = time.monotonic() + 90
        while JudgeRun.objects.get(pk=run.pk).is_active and time.monotonic() < deadline:
            time.sleep(0.2)
        run = JudgeRun.objects.get(pk=run.pk)
        assert run.state == "done" and run.n_done == 3, run.error
        assert server.requests, "the worker never called the server"  # so the key was really used
    finally:
        server.stop()
    release = release_create(project=project, by=manager, enqueue=False)
    release = release_build(release_id=release.pk)
    assert release.status == "done", release.error
    files = _bytes_of(release_dir(release=release))
    assert any(name.endswith(".zip") for name, _ in files), [n for n, _ in files]
    with celery_worker_process.log.open("rb") as fh:
        fh.seek(log_start)
        log = fh.read()
    assert b"Scan" in log or b"judge" in log.lower(), "the worker log holds nothing about the run"
    for name, data in [("worker log", log), *files]:
        assert KEY.encode() not in data and KEY[:-4].encode() not in data, name
