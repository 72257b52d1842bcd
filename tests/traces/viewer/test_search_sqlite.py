"""Search inside a trace on SQLite, the database `make demo` runs on (the rest of the suite runs on
PostgreSQL, whose ASCII search is plain SQL of its own): a fresh process on a SQLite file
migrates, imports a trace and searches it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SEARCH = """
from traces.models import Trace
from traces.viewer.search import trace_search
trace = Trace.objects.get()
for q in ("alpha", "100%", "E_N"):
    print("HITS", q, len(trace_search(trace=trace, q=q).hits))
"""


def manage(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=f"sqlite:///{db}", DJANGO_SETTINGS_MODULE="mast_site.settings", LOG_LEVEL="WARNING")
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_search_on_sqlite_folds_ascii_case_and_reads_wildcards_as_text(tmp_path):
    db = tmp_path / "mast.sqlite3"
    assert manage(db, "migrate", "-v", "0").returncode == 0
    log = tmp_path / "t.txt"
    log.write_text("Alpha beta\n\nGAMMA alpha: 100% done\n\ndone_now, then\n", encoding="utf-8")
    done = manage(db, "import_traces", str(log), "--project", "lite", "--format", "plaintext", "--no-progress")
    assert done.returncode == 0, done.stderr
    out = manage(db, "shell", "-c", SEARCH)
    assert out.returncode == 0, out.stderr
    hits = [line.split(" ")[1:] for line in out.stdout.splitlines() if line.startswith("HITS ")]
    found = {q: int(n) for q, n in hits}
    assert found == {"alpha": 2, "100%": 1, "E_N": 1}  # "Alpha" and "alpha"; % and _ are plain characters
