"""Every task queued by name (traces.jobs.task_send) names a task a worker registers."""

import importlib
import re
from pathlib import Path

from mast_site.celery import app

ROOT = Path(__file__).resolve().parent.parent
SENT = re.compile(r"""task_send\(\s*["']([\w.]+)["']""")


def test_every_task_sent_by_name_is_registered_by_the_worker_imports():
    for module in app.conf.imports:  # what a worker imports when it starts
        importlib.import_module(module)
    sent = {
        name
        for folder in ("traces", "annotations", "taxonomy", "mast_site")
        for path in (ROOT / folder).rglob("*.py")
        for name in SENT.findall(path.read_text())
    }
    assert {"traces.import_job", "annotations.build_release", "annotations.prelabel_trace"} <= sent
    assert sent - set(app.tasks) == set()
