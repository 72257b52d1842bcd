"""The corpus search's indexer runs on a real Celery worker: steps an import wrote not searchable
become searchable without anyone calling it (the worker's sweep sends ``traces.search_index``)."""

from __future__ import annotations

import time

import pytest

from tests.annotations.releases_factories import make_trace
from traces.models import Step


@pytest.mark.django_db(transaction=True)
def test_a_worker_makes_new_steps_searchable(project, celery_worker_process, settings):
    trace = make_trace(project, raw_text="a\nb")
    for i, text in enumerate(["a zebrafish approved", "b"]):
        Step.objects.create(trace=trace, index=i, content=text, line_start=i + 1, line_end=i + 1)
    assert not Step.objects.filter(searchable=True).exists()
    deadline = time.monotonic() + 60  # the sweep runs every MAST_JOB_SWEEP_SECONDS (10 s) and on connect
    while time.monotonic() < deadline and Step.objects.filter(searchable=False).exists():
        time.sleep(0.5)
    assert Step.objects.filter(searchable=True).count() == 2
