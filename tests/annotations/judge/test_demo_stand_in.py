"""The demo's stand-in LLM runs beside the demo (``manage.py serve_demo_llm``, as scripts/demo.sh
starts it): the seeded connection points at it, *Test connection* succeeds and a new judge run on
it completes through a real Celery worker after seeding is over."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annotations.demo import DemoContext
from annotations.judge import demo as judge_demo
from annotations.judge.connections import connection_test
from annotations.judge.runs import judge_run_create
from annotations.models import Annotation, JudgeRun, ProviderConnection
from tests.annotations.conftest import make_judge_traces

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_stand_in(port: int) -> subprocess.Popen:
    """``manage.py serve_demo_llm --port N`` in its own process group, as scripts/demo.sh runs it."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve_demo_llm", "--port", str(port)],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )


@pytest.fixture
def stand_in():
    port = free_port()
    proc = start_stand_in(port)
    line = proc.stdout.readline()  # the command says "ready" once it listens
    assert "ready" in line and "not a real model" in line, line
    yield f"http://127.0.0.1:{port}/v1"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=15) == 0  # a TERM (the demo's trap) ends it cleanly


def test_after_seeding_the_demo_connection_answers_and_a_new_run_completes_on_a_worker(
    project, manager, stand_in, celery_worker_process
):
    make_judge_traces(project, 5, words="the agents repeat the same step again")
    ctx = DemoContext(project=project, users={"manager": manager}, llm_url=stand_in)
    judge_demo._scripted_llm(ctx)  # the judge seed, as seed_demo --llm-url runs it
    conn = ProviderConnection.objects.get(project=project, name=judge_demo.CONNECTION)
    assert conn.base_url == stand_in and "stand-in" in conn.name and "not a real model" in conn.name
    seeded = JudgeRun.objects.filter(connection=conn)
    # the project's prompt twice (its self-agreement) and the MAST official judge
    assert sorted(seeded.values_list("provider", "state")) == [("mast", "done"), ("openai", "done"), ("openai", "done")]

    # Seeding is over; the stand-in still answers.
    probe = connection_test(connection=conn)
    assert probe.ok, probe.message
    conn.refresh_from_db()
    assert conn.adaptations[judge_demo.MODEL][:1] == ["system_role"]  # learned by the seeded runs

    run = judge_run_create(
        project=project, by=manager, provider="openai", connection=conn, model=judge_demo.MODEL, max_tokens=1500
    )
    deadline = time.monotonic() + 90
    while JudgeRun.objects.get(pk=run.pk).is_active and time.monotonic() < deadline:
        time.sleep(0.2)
    run.refresh_from_db()
    assert run.state == "done" and run.n_done == 5 and run.n_failed == 0, run.error
    assert Annotation.objects.filter(rater=run.rater).count() == 5
    # It started in the form the connection recorded: nothing new was refused.
    assert run.dropped_params == conn.adaptations[judge_demo.MODEL]


def test_the_stand_in_says_which_port_to_change_when_its_port_is_taken():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = start_stand_in(taken.getsockname()[1])
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "DEMO_LLM_PORT" in out, out
