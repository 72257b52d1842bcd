"""Driving a judge run in this process, without a Celery worker (``prelabel --inline``).

The services are told so explicitly (``dispatch.INLINE``), never by a process-wide switch: see
``dispatch.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

from annotations.judge.dispatch import INLINE, judge_run_dispatch
from annotations.judge.runs import judge_run_start
from annotations.judge.worker import judge_item_process
from annotations.models import JudgeItem, JudgeRun


def judge_run_drive_inline(
    *, run_id: int, threads: int | None = None, on_tick: Callable[[JudgeRun], None] | None = None
) -> JudgeRun:
    """Process a run in this process with a thread pool (no Celery worker needed); returns the final run.

    Every service is called with the ``INLINE`` dispatcher, so nothing goes to Celery; this loop
    finds the claimed (running) items in the database and hands each to the pool once per claim.
    A whole-run provider (the baseline) is labelled by the start itself."""

    def work(item_id: int, claim: int) -> None:
        try:
            judge_item_process(item_id=item_id, claim=claim, dispatcher=INLINE)
        finally:
            connections.close_all()

    judge_run_start(run_id=run_id, dispatcher=INLINE)
    run = JudgeRun.objects.get(pk=run_id)
    submitted: set[tuple[int, int]] = set()
    futures = []
    with ThreadPoolExecutor(max_workers=threads or run.concurrency) as pool:
        while True:
            run.refresh_from_db()
            if on_tick:
                on_tick(run)
            claimed = set(
                JudgeItem.objects.filter(run_id=run_id, state=JudgeItem.State.RUNNING).values_list("id", "claim")
            )
            new = claimed - submitted
            for pair in new:
                submitted.add(pair)
                futures.append(pool.submit(work, *pair))
            futures = [f for f in futures if not f.done()]
            if not futures and not new:
                # reclaim: an item whose task died here without a result comes back when its
                # lease ends, instead of keeping this loop waiting for ever.
                judge_run_dispatch(run_id=run_id, reclaim=True, dispatcher=INLINE)
                run.refresh_from_db()
                if (
                    not run.is_active
                    or not JudgeItem.objects.filter(run_id=run_id, state=JudgeItem.State.RUNNING).exists()
                ):
                    break
            time.sleep(0.1)
    run.refresh_from_db()
    if on_tick:
        on_tick(run)
    return run
