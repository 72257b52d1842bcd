"""A throw-away PostgreSQL database for a benchmark, on the server DATABASE_URL points at.

Every bench that needs the ORM uses these three steps, so they all run with the same
production-like settings (DEBUG off, plain http on loopback).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench_env(db_name: str, **extra: str) -> dict[str, str]:
    """Environment for a bench database named `db_name`; `extra` overrides or adds variables."""
    base_url = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/mast")
    if not base_url.startswith("postgres"):
        sys.exit(f"{Path(sys.argv[0]).name} needs PostgreSQL (DATABASE_URL=postgres://...)")
    server = base_url.rsplit("/", 1)[0]
    return {
        **os.environ,
        "DATABASE_URL": f"{server}/{db_name}",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-secret-key-0123456789abcdefghijklmnopqrstuvwxyz"),
        "ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
        "DEBUG": "false",
        "SECURE_SSL_REDIRECT": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "MANIFEST_STATIC": "false",
        "DJANGO_ALLOW_ASYNC_UNSAFE": "true",
        **extra,
    }


def create_bench_db(env: dict[str, str], *, reuse: bool = False) -> bool:
    """Create (or with `reuse`, keep) the database of `env` and migrate it; True when it is new."""
    server, name = env["DATABASE_URL"].rsplit("/", 1)
    admin = f"{server}/postgres"
    exists = subprocess.run(
        ["psql", admin, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],  # noqa: S608 - our own name
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    fresh = not (reuse and exists)
    if fresh:
        for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}"):
            subprocess.run(["psql", admin, "-qc", sql], check=True, capture_output=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO, env=env, check=True)
    return fresh


# the large text and JSON columns (traces migrations 0003 and 0010 set them to lz4)
TOAST_COLUMNS = [
    ("traces_trace", "raw_text"),
    ("traces_trace", "task"),
    ("traces_trace", "metadata"),
    ("traces_step", "content"),
    ("traces_step", "details"),
    ("traces_importjob", "report"),
]


def set_toast_compression(env: dict[str, str], method: str) -> None:
    """Compress values written from now on with ``method`` (lz4 or pglz), to compare the two."""
    sql = "; ".join(f'ALTER TABLE "{t}" ALTER COLUMN "{c}" SET COMPRESSION {method}' for t, c in TOAST_COLUMNS)
    subprocess.run(["psql", env["DATABASE_URL"], "-qc", sql], check=True, capture_output=True)


def drop_bench_db(env: dict[str, str]) -> None:
    server, name = env["DATABASE_URL"].rsplit("/", 1)
    subprocess.run(["psql", f"{server}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=True)


def django_setup(env: dict[str, str]) -> None:
    """Configure this process for `env` and set Django up."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a local process and all its threads so far (``/proc``, Linux), e.g. the
    PostgreSQL backend serving a connection; None when there is no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], *, port: int, workers: int, threads: int, log_dir: Path, access_log: Path | None = None
) -> subprocess.Popen:
    """gunicorn with the settings the README recommends (gthread, keep-alive 30) on 127.0.0.1:`port`,
    its output in `log_dir`/gunicorn.log; returns once /login/ answers 200 (exits if it never does).
    With `access_log`, each request is logged as "METHOD STATUS MICROSECONDS"."""
    import http.client
    import time

    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / "gunicorn.log", "wb")  # noqa: SIM115 - lives as long as the server
    cmd = [str(Path(sys.executable).parent / "gunicorn"), "mast_site.wsgi", "-b", f"127.0.0.1:{port}"]
    cmd += ["-w", str(workers), "-k", "gthread", "--threads", str(threads), "--keep-alive", "30"]
    if access_log is not None:
        cmd += ["--access-logfile", str(access_log), "--access-logformat", "%(m)s %(s)s %(D)s"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120  # a loaded machine (load 10) needs a minute to import Django twice
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/login/")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    sys.exit(f"gunicorn did not start; see {log_dir / 'gunicorn.log'}")
