"""The web process behind PgBouncer in transaction mode (issue 28; README "Scaling out").

A real pgbouncer process (Debian's package) pools the test database with two server connections
in transaction mode; gunicorn with eight threads talks to it. With DATABASE_POOL_MODE=transaction
the site works: pages, the API, in-trace search (a server-side cursor without the setting), label
saves, each request run more often than psycopg's prepare threshold and from more threads than the
pool has connections. Without the setting PgBouncer refuses the connection's startup options, as
the README says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from tests.annotations.workspace_factories import make_trace
from tests.processes import ARTIFACTS, WebProcess, free_port
from tests.test_crash_recovery import _lab, _state, _token

pytestmark = [pytest.mark.django_db(transaction=True)]


class PgBouncer:
    def __init__(self, folder: Path, *, pool_size: int = 2):
        binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else "")
        if not binary:
            # Must run, not skip (as Chromium): .ci/run installs it.
            pytest.fail("pgbouncer not found: install Debian's pgbouncer (apt-get install -y pgbouncer)")
        db = connection.settings_dict
        self.port = free_port()
        folder.mkdir(parents=True, exist_ok=True)
        users = folder / "users.txt"
        users.write_text(f'"{db["USER"]}" ""\n')
        ini = folder / "pgbouncer.ini"
        ini.write_text(
            f"[databases]\n* = host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\npool_mode = transaction\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 100\n"
        )
        for f in (users, ini):
            f.chmod(0o644)
        cmd = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(ini)]
        self.log = ARTIFACTS / "pgbouncer.log"
        self.log.parent.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        self.url = f"postgres://{db['USER']}@127.0.0.1:{self.port}/{db['NAME']}"
        deadline = time.time() + 20
        while time.time() < deadline:
            if subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pgbouncer did not start; see {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def pgbouncer(tmp_path):
    bouncer = PgBouncer(tmp_path / "pgbouncer")
    yield bouncer
    bouncer.stop()


def _web(bouncer: PgBouncer, **extra) -> WebProcess:
    env = {**os.environ, "DATABASE_URL": bouncer.url, **extra}
    return WebProcess(env, log=ARTIFACTS / "gunicorn-pgbouncer.log", threads=8)


def test_the_site_works_behind_pgbouncer_in_transaction_mode(pgbouncer, project, annotator):
    traces = [make_trace(project, n_steps=30) for _ in range(4)]
    token = _token(annotator)
    web = _web(pgbouncer, DATABASE_POOL_MODE="transaction")
    try:

        def reads(trace) -> list[int]:
            base = f"/api/projects/{project.slug}/traces"
            paths = [f"{base}/", f"{base}/{trace.pk}/", f"{base}/{trace.pk}/steps/"]
            paths.append(f"{base}/{trace.pk}/search/?q=step")
            return [web.request("GET", path, token)[0] for path in paths]

        def save(trace) -> list[int]:
            path = f"/api/projects/{project.slug}/traces/{trace.pk}/annotation/"
            statuses, revision = [], 0
            for k in range(7):  # past psycopg's prepare threshold (5)
                body = _state(revision, [_lab("1.1", rationale=f"save {k}"), _lab("2.1", "absent")])
                status, out = web.request("PUT", path, token, json.dumps(body).encode())
                statuses.append(status)
                revision = out.get("revision", revision)
            return statuses

        with ThreadPoolExecutor(8) as pool:  # eight client connections on two server connections
            read_statuses = [s for r in pool.map(reads, traces * 4) for s in r]
            save_statuses = [s for r in pool.map(save, traces) for s in r]
        assert set(read_statuses) == {200}, read_statuses
        assert set(save_statuses) == {200}, save_statuses
        status, hits = web.request("GET", f"/api/projects/{project.slug}/traces/{traces[0].pk}/search/?q=step", token)
        assert status == 200 and hits["hits"], hits
    finally:
        web.kill()
    from annotations.models import Annotation

    assert Annotation.objects.filter(trace__in=traces).count() == 4
    assert {a.revision for a in Annotation.objects.filter(trace__in=traces)} == {7}


def test_without_the_setting_pgbouncer_refuses_the_connection_saying_why(pgbouncer, project, annotator):
    """The default connection sends startup options (jit=off); PgBouncer refuses them: the README's
    DATABASE_POOL_MODE=transaction is what makes it work."""
    web = _web(pgbouncer)
    try:
        status, _, _ = web.fetch("GET", f"/api/projects/{project.slug}/traces/", _token(annotator))
    finally:
        web.kill()
    assert status == 500
    assert b"unsupported startup parameter: options" in web.log.read_bytes()
