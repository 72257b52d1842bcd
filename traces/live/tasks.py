"""Background job of live traces: the sweep that assembles the traces whose quiet period is over
(mast_site/celery.py sends it from every live worker every MAST_JOB_SWEEP_SECONDS)."""

from __future__ import annotations

import logging

from celery import shared_task

from traces.live.assembly import live_assemble_due

logger = logging.getLogger(__name__)


@shared_task(name="traces.live_assemble", acks_late=True, ignore_result=True)
def live_assemble_task(repeat: bool = False) -> None:
    """Assemble the live traces due. No chain of its own (``repeat`` is accepted like the other
    sweeps'): every worker sends it every MAST_JOB_SWEEP_SECONDS."""
    try:
        n = live_assemble_due()
    except Exception:
        logger.exception("the live-trace sweep failed; the next one runs in MAST_JOB_SWEEP_SECONDS")
        return
    if n:
        logger.info("live traces: %s assembled", n)
