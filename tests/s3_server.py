"""A real S3-protocol server on 127.0.0.1 for the storage tests and the many-process bench: moto's
standalone server (``moto_server``, from requirements-dev), a separate process speaking the S3 REST
API over HTTP, as MinIO or AWS would. Each test takes a bucket of its own.

    server = S3Server().start()
    url = server.storage_url(server.bucket("imports-test"))  # s3://...?endpoint_url=...
    ...
    server.stop()
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ACCESS_KEY, SECRET_KEY, REGION = "studio-test", "studio-test-secret", "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, log: Path | None = None) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = log or REPO / "test-artifacts" / "moto-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> S3Server:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        server = Path(sys.executable).parent / "moto_server"
        self.proc = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"moto_server exited; see {self.log}") from None
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moto_server did not answer within 60 s; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def storage_url(self, bucket: str, prefix: str = "") -> str:
        """The STORAGE_URL of ``bucket`` on this server, credentials included (a test's own)."""
        path = f"/{prefix}" if prefix else ""
        return (
            f"s3://{ACCESS_KEY}:{SECRET_KEY}@{bucket}{path}"
            f"?endpoint_url={self.endpoint}&region={REGION}&addressing_style=path"
        )
