"""The judge on SQLite, the database `make demo` runs on: the per-trace statements are plain SQL
(annotations/judge/sql.py), written for PostgreSQL and SQLite alike, and the rest of the
suite runs on PostgreSQL. So here the whole path runs in a fresh process on a SQLite file:
migrate, import, `prelabel --inline` against the scripted chat-completions server, then the same
run again, which the cache answers."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def manage(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=f"sqlite:///{db}", DJANGO_SETTINGS_MODULE="mast_site.settings", LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def sqlite_project(tmp_path):
    db = tmp_path / "mast.sqlite3"
    assert manage(db, "migrate", "-v", "0").returncode == 0
    logs = []
    for k in range(6):
        path = tmp_path / f"run{k}.log"
        blocks = [f"Planner: step {i} of run {k}, the agent plans and writes code.\n" * 8 for i in range(4)]
        path.write_text("\n\n".join(blocks))
        logs.append(str(path))
    done = manage(db, "import_traces", *logs, "--project", "lite", "--format", "plaintext", "--no-progress")
    assert done.returncode == 0, done.stderr
    return db


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


def test_a_judge_run_on_sqlite_labels_every_trace_once_and_a_rerun_is_all_cached(sqlite_project, llm_server):
    db = sqlite_project
    prelabel = ("prelabel", "--project", "lite", "--base-url", llm_server.url, "--model", "m", "--concurrency", "3")

    first = manage(db, *prelabel, "--inline")
    assert first.returncode == 0, first.stderr
    assert len(llm_server.requests) == 6
    runs = rows(db, "SELECT id, state, n_done, n_failed, n_cached, tokens_in, tokens_out FROM annotations_judgerun")
    assert runs == [(runs[0][0], "done", 6, 0, 0, 6 * 1000, 6 * 200)]
    items = rows(db, "SELECT state, claim, annotation_id IS NOT NULL FROM annotations_judgeitem ORDER BY id")
    assert items == [("done", 1, 1)] * 6
    per_trace = rows(db, "SELECT trace_id, COUNT(*) FROM annotations_annotation GROUP BY trace_id")
    assert len(per_trace) == 6 and {n for _, n in per_trace} == {1}
    modes = "SELECT COUNT(*) FROM taxonomy_failuremode m JOIN traces_project p ON p.taxonomy_version_id = m.version_id"
    assert rows(db, "SELECT COUNT(*) FROM annotations_modelabel")[0][0] == 6 * rows(db, modes)[0][0]

    again = manage(db, *prelabel, "--inline")
    assert again.returncode == 0, again.stderr
    assert len(llm_server.requests) == 6  # no new request: every answer came from the cache
    last = rows(db, "SELECT state, n_done, n_cached, tokens_in FROM annotations_judgerun ORDER BY id DESC LIMIT 1")
    assert last == [("done", 6, 6, 0)]
    per_trace = rows(db, "SELECT trace_id, COUNT(*), MAX(revision) FROM annotations_annotation GROUP BY trace_id")
    assert {(n, rev) for _, n, rev in per_trace} == {(1, 2)}  # the same rater's annotation, replaced
