"""Celery tasks of the annotations app: thin wrappers that load ids and call one service.

The LLM judge runs one ``annotations.prelabel_trace`` task per trace. The calls are I/O-bound,
so run the worker with the threads pool, at least as many threads as the sum of the
concurrency of the runs you want in flight, e.g.

    celery -A mast_site worker -P threads --concurrency=32

To scale out, start more workers (on more machines) against the same broker and database: the
per-run limit is enforced in the database (dispatch.judge_run_dispatch), not by the pool size.
"""

from __future__ import annotations

import logging

from celery import shared_task

from annotations.judge.dispatch import ChainDispatcher
from annotations.judge.runs import judge_run_start, judge_sweep
from annotations.judge.worker import judge_item_process
from traces.jobs import sweep_seconds

logger = logging.getLogger(__name__)


@shared_task(name="annotations.judge_run_start", acks_late=True, ignore_result=True)
def judge_run_start_task(run_id: int) -> None:
    judge_run_start(run_id=run_id)


@shared_task(name="annotations.prelabel_trace", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prelabel_trace(item_id: int, claim: int | None = None) -> str:
    """Label the item, then each successor it claimed, in this thread (``dispatch.ChainDispatcher``)."""
    chain = ChainDispatcher()
    outcome = judge_item_process(item_id=item_id, claim=claim, dispatcher=chain)
    while (pair := chain.take()) is not None:
        outcome = judge_item_process(item_id=pair[0], claim=pair[1], dispatcher=chain)
    return outcome


@shared_task(name="annotations.judge_sweep", acks_late=True, ignore_result=True)
def judge_sweep_task(repeat: bool = True) -> None:
    """Re-dispatch running runs (re-claims items whose worker died); repeats while runs are running.
    ``repeat=False``: the one-off backstop every live worker sends (mast_site/celery.py), since
    the worker holding the next countdown may be the one that died.

    A sweep that fails (the database dropped the worker's connection: a restart, a failover)
    still sends the next one: it is the only thing that brings the runs of a dead worker back."""
    try:
        wait = judge_sweep()
    except Exception:
        logger.exception("the judge sweep failed; trying again in %s s", sweep_seconds())
        wait = sweep_seconds()
    if wait is not None and repeat:
        judge_sweep_task.apply_async(countdown=wait)
