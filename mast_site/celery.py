"""The Celery app. Tasks live in each app's tasks.py; job state lives in our own tables."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")

app = Celery("mast_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
