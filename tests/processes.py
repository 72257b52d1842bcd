"""Real processes of the product for tests: a Celery worker and a gunicorn web server on the test
database, each with the environment it is given (the many-process test gives each its own folders).
conftest's ``celery_worker_process`` and the crash tests use them too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
WEB_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "process-test-only-secret-key-0123456789abcdefghijklmnopqrstuvwxyz",
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "SECURE_SSL_REDIRECT": "false",
    "MANIFEST_STATIC": "false",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_env(base: dict, folder: Path) -> dict:
    """The environment of one process that shares only its services with the others: ``base``
    with a MEDIA_ROOT, TMPDIR and var folder of its own under ``folder`` (the many-process test
    and bench)."""
    own = {"MEDIA_ROOT": folder / "media", "TMPDIR": folder / "tmp", "MAST_VAR_DIR": folder / "var"}
    for path in own.values():
        path.mkdir(parents=True, exist_ok=True)
    return {**base, **{k: str(v) for k, v in own.items()}}


class WorkerProcess:
    """``celery worker`` (thread pool) with ``env``; its output appended to ``log``."""

    def __init__(self, env: dict, log: Path | None = None):
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.log = log or ARTIFACTS / "celery-worker.log"

    def purge(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "mast_site", "purge", "-f"],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            timeout=60,
        )

    def start(self, concurrency: int = 4, name: str = "test") -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        cmd = [sys.executable, "-m", "celery", "-A", "mast_site", "worker", "-l", "INFO", "-P", "threads"]
        cmd += [f"--concurrency={concurrency}", "-n", f"{name}@%h", "--without-gossip", "--without-mingle"]
        cmd += ["--without-heartbeat"]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            with self.log.open("rb") as fh:
                fh.seek(offset)
                if b"ready." in fh.read():
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited early; see {self.log}")
            time.sleep(0.2)
        raise RuntimeError(f"celery worker not ready after 30 s; see {self.log}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


class WebProcess:
    """gunicorn on the test database, as production runs it (bench/benchdb.py start_gunicorn), with
    ``env`` (the test's environment and DATABASE_URL by default) plus WEB_ENV."""

    def __init__(self, env: dict | None = None, *, log: Path | None = None, threads: int = 2):
        from tests.conftest_paths import subprocess_database_url

        self.env = dict(env) if env is not None else {**os.environ, "DATABASE_URL": subprocess_database_url()}
        self.env.update(WEB_ENV)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or ARTIFACTS / "gunicorn-crash.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [str(Path(sys.executable).parent / "gunicorn"), "mast_site.wsgi", "-b", f"127.0.0.1:{self.port}"]
        cmd += ["-w", "1", "-k", "gthread", "--threads", str(threads)]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/login/", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"gunicorn did not start; see {self.log}")

    def request(self, method: str, path: str, token: str, body: bytes = b"", content_type: str = "application/json"):
        """(status, parsed JSON body) of an API call with ``token`` (``{"not_json": ...}`` for another body)."""
        status, data, _ = self.fetch(method, path, token, body, content_type)
        try:
            return status, json.loads(data or b"{}")
        except ValueError:  # an HTML error page: kept for the assertion's message
            return status, {"not_json": data[:500].decode(errors="replace")}

    def fetch(self, method: str, path: str, token: str, body: bytes = b"", content_type: str = "application/json"):
        """(status, raw body, headers) of a request with ``token``; redirects are not followed."""
        req = urllib.request.Request(f"{self.url}{path}", data=body or None, method=method)
        req.add_header("Authorization", f"Token {token}")
        if body:
            req.add_header("Content-Type", content_type)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=60) as r:
                return r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
