"""Background jobs of the corpus area: a behaviour search, and the sweep that sends again the
searches whose job was lost (mast_site/celery.py sends it from every live worker)."""

from __future__ import annotations

import logging

from celery import shared_task

from annotations.corpus.behaviour import behaviour_search_run, behaviour_sweep

logger = logging.getLogger(__name__)


@shared_task(name="annotations.behaviour_search", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def behaviour_search_task(search_id: int) -> str:
    """Read the search's traces not read yet (idempotent: a second delivery finds nothing to do)."""
    return behaviour_search_run(search_id=search_id)


@shared_task(name="annotations.behaviour_sweep", acks_late=True, ignore_result=True)
def behaviour_sweep_task(repeat: bool = False) -> None:
    """Send again the behaviour searches whose worker died (no chain of its own, like the alerts sweep)."""
    try:
        n = behaviour_sweep()
    except Exception:
        logger.exception("the behaviour-search sweep failed; the next one runs in MAST_JOB_SWEEP_SECONDS")
        return
    if n:
        logger.info("behaviour sweep: %s search(es) sent again", n)
