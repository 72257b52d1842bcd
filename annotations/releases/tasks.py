"""Background job for dataset releases (imported by AnnotationsConfig.ready so workers register it)."""

from __future__ import annotations

from celery import shared_task

from annotations.releases.services import release_build


@shared_task(name="annotations.build_release", acks_late=True, ignore_result=True)
def build_release(release_id: int) -> None:
    """Build a release's files; idempotent (a done release returns at once, a crashed one restarts)."""
    release_build(release_id=release_id)
