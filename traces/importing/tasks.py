"""Celery tasks of the traces app: thin, they load by id and call one service."""

from celery import shared_task

from traces.importing.jobs import import_job_run


@shared_task(name="traces.import_job", acks_late=True)
def import_job(job_id: int) -> None:
    """Run an upload's import. acks_late is safe: the import is all-or-nothing, skips duplicates
    and runs under the job's liveness lock, so a redelivered message imports the files once."""
    import_job_run(job_id=job_id)
