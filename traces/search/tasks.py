"""The corpus search's indexer as a Celery task (mast_site/celery.py sends it from every worker's
sweep; it sends itself again at once while steps wait)."""

from __future__ import annotations

import logging

from celery import shared_task

from traces.search.indexing import steps_index_pending, steps_waiting

logger = logging.getLogger(__name__)


@shared_task(name="traces.search_index", acks_late=True, ignore_result=True)
def search_index_task(repeat: bool = True) -> None:
    """Index for up to 20 s, then (``repeat``) go on in a new task while steps still wait, so one
    large import does not hold a worker thread for minutes."""
    try:
        n = steps_index_pending(max_seconds=20)
    except Exception:
        logger.exception("the search indexer failed; the next sweep tries again")
        return
    if n:
        logger.info("search index: %s steps made searchable", n)
    if repeat and n and steps_waiting():
        search_index_task.delay(repeat=True)
