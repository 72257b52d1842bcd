"""The WSGI entry point tunes the garbage collector of each web process (issue 18: slowest saves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = "import gc, mast_site.wsgi; print(gc.get_threshold()[0], gc.get_freeze_count() > 0)"


def _probe(**env: str) -> str:
    # a fresh interpreter: importing the WSGI module here would retune the test process itself
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "mast_site.settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_web_processes_freeze_start_up_objects_and_collect_less_often():
    assert _probe() == "50000 True"


def test_the_first_threshold_can_be_set_back():
    assert _probe(MAST_GC_GEN0="700") == "700 True"
