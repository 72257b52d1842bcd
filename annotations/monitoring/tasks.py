"""Background jobs of alerts: one webhook try, and the sweep that evaluates the rules due and sends
the tries whose message was lost (mast_site/celery.py sends it from every live worker)."""

from __future__ import annotations

import logging

from celery import shared_task

from annotations.monitoring.alerts import alerts_sweep, delivery_send

logger = logging.getLogger(__name__)


@shared_task(name="annotations.webhook_deliver", acks_late=True, ignore_result=True)
def webhook_deliver_task(delivery_id: int) -> None:
    """One try of a delivery; a try already made or being made by another worker returns at once."""
    delivery_send(delivery_id=delivery_id)


@shared_task(name="annotations.alerts_sweep", acks_late=True, ignore_result=True)
def alerts_sweep_task(repeat: bool = False) -> None:
    """Evaluate the rules due and resend lost tries. No chain of its own (``repeat`` is accepted like
    the other sweeps'): every worker sends it every MAST_JOB_SWEEP_SECONDS."""
    try:
        result = alerts_sweep()
    except Exception:
        logger.exception("the alerts sweep failed; the next one runs in MAST_JOB_SWEEP_SECONDS")
        return
    if result["fired"] or result["resent"]:
        logger.info("alerts sweep: %(fired)s fired, %(resent)s tries resent", result)
