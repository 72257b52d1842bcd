"""The project package; loads the Celery app so `shared_task`s bind to it."""

from mast_site.celery import app as celery_app

__all__ = ("celery_app",)
