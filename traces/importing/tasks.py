"""Celery tasks of the traces app: thin, they load by id and call one service."""

from celery import shared_task

from traces.importing.jobs import import_job_run


@shared_task(name="traces.import_job", acks_late=True)
def import_job(job_id: int) -> None:
    """Run an upload's import. acks_late is safe: the import is all-or-nothing and skips
    duplicates, so a redelivered message after a crash imports the same files once."""
    import_job_run(job_id=job_id)
