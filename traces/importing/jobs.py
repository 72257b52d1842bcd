"""Import jobs: web and API uploads, stored and then imported in the background.

``import_job_create`` saves the uploaded files under ``imports/<job id>/`` in the product's
storage (traces/storage.py: MEDIA_ROOT, or an S3-compatible store shared by every machine) and
queues the Celery task after commit; the task calls ``import_job_run``, which runs
``traces_import`` and puts the final figures on the ImportJob row. On a local disk the worker
reads the uploads where they are; from an object store it fetches them into a private temporary
folder first (the parsers seek), removed when the import ends.

Progress: the import holds one transaction on the default connection, so progress rows written
through it would stay invisible until the end. The job writes its progress to a small JSON file
beside the uploads (``imports/<id>.progress.json`` in the same storage, replaced whole); pages
and the API read it while the job runs (``import_job_progress``). This needs no extra service:
the worker and the web processes already share the storage for the uploaded files.

A killed worker (traces/jobs.py has the rules): the job runs under its liveness lock, so a
duplicate delivery exits and the sweep sees a dead attempt. The import's transaction rolled back
with the dead connection, so the database holds none of it; the sweep resets the progress file
and queues the job again, and after MAST_JOB_MAX_ATTEMPTS dead attempts fails it.

A failed job says which of two kinds it is (``ImportJob.failure``):

* ``refused``: the input itself was refused (``TraceImportError``: a bad file, a limit). The
  upload is deleted at once, since running it again would fail the same way: no retry.
* ``stopped``: the worker died or an internal error happened. The upload is kept for
  ``MAST_IMPORT_KEEP_FAILED_HOURS`` so a manager can retry (``import_job_retry``); the sweep
  deletes older ones.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from traces import storage
from traces.importing.results import ImportProgress, TraceImportError
from traces.importing.service import IMPORT_FORMATS, traces_import
from traces.importing.sources import import_limits, upload_size
from traces.jobs import (
    JobKind,
    JobNotRetryable,
    database_connection_lost,
    job_queue_after_commit,
    job_retry,
    job_running,
    task_send,
)
from traces.models import ImportJob, Project

logger = logging.getLogger(__name__)

IMPORTS = "imports"


def upload_folder(job_id: int) -> str:
    """The job's upload folder in the storage (ImportJob.upload_dir holds it)."""
    return f"{IMPORTS}/{job_id}"


def _progress_name(job_id: int) -> str:
    return f"{IMPORTS}/{job_id}.progress.json"


def _safe_upload_name(name: str, taken: set[str]) -> str:

    base = os.path.basename(name.replace("\\", "/")) or "upload"
    try:
        base = get_valid_filename(base)
    except Exception:  # noqa: BLE001 - SuspiciousFileOperation for names like ".."
        base = "upload"
    stem, dot, ext = base.partition(".")
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}{dot}{ext}"
    taken.add(candidate)
    return candidate


def _declared_size(f: Any) -> int:
    """An upload's size before reading it (``upload_size``); 0 for a stream that cannot seek."""
    try:
        return upload_size(f) or 0
    except (AttributeError, OSError, ValueError):
        return 0


def import_job_create(
    *, project: Project, by: Any, files: list[Any], format: str = "auto", import_rest: bool = False
) -> ImportJob:
    """Save uploaded files under imports/<job id>/ in the storage and queue the job (after commit).

    Limits the upload can be checked against without reading it are checked here, so the
    uploader hears at once; everything else is checked by the job, which fails whole.
    """
    if format not in IMPORT_FORMATS:
        raise TraceImportError(f"unknown format {format!r}; expected one of {', '.join(IMPORT_FORMATS)}")
    if not files:
        raise TraceImportError("choose at least one file (trace files or a .zip)")
    max_file, max_total, _, _ = import_limits()
    total = 0
    for f in files:
        size = _declared_size(f)
        if size > max_file:
            name = os.path.basename(f.name)
            raise TraceImportError(f"{name}: {size:,} bytes; the limit per file is {max_file:,} bytes")
        total += size
    if total > max_total:
        raise TraceImportError(f"the upload holds {total:,} bytes; the limit per import is {max_total:,} bytes")

    with transaction.atomic():
        job = ImportJob.objects.create(
            project=project, created_by=by, format=format, bytes_total=total, import_rest=import_rest
        )
        folder = upload_folder(job.pk)
        names: list[str] = []
        taken: set[str] = set()
        try:
            for f in files:
                name = _safe_upload_name(f.name, taken)
                storage.put(f"{folder}/{name}", f)  # streamed in chunks (a multipart upload on S3)
                names.append(name)
        except Exception:
            storage.delete_tree(folder)  # no job row will point at it: the transaction rolls back
            raise
        job.upload_dir = folder
        job.file_names = names
        job.save(update_fields=["upload_dir", "file_names"])
        job_queue_after_commit(kind=IMPORT_JOBS, pk=job.pk)
    return job


def _write_progress(job_id: int, p: ImportProgress) -> None:
    data = {
        "bytes_done": p.bytes_done,
        "bytes_total": p.bytes_total,
        "n_imported": p.imported,
        "n_duplicates": p.duplicates,
        "current": p.current,
    }
    try:
        storage.put(_progress_name(job_id), json.dumps(data).encode())
    except Exception:  # noqa: BLE001 - progress is a courtesy; the import itself must not fail over it
        logger.warning("import job %s: its progress could not be written", job_id, exc_info=True)


def import_job_progress(*, job: ImportJob) -> dict[str, Any]:
    """The job's live figures: from the progress file while it runs, from the row otherwise."""
    figures = {
        "bytes_done": job.bytes_done,
        "bytes_total": job.bytes_total,
        "n_imported": job.n_imported,
        "n_duplicates": job.n_duplicates,
        "current": "",
    }
    if job.status == ImportJob.Status.RUNNING:
        try:
            figures.update(json.loads(storage.read_bytes(_progress_name(job.pk))))
        except FileNotFoundError:
            pass  # not written yet: the row's figures
        except Exception:  # noqa: BLE001 - the page shows the row's figures rather than fail
            logger.warning("import job %s: its progress could not be read", job.pk, exc_info=True)
    if job.status == ImportJob.Status.DONE:
        percent = 100
    else:
        total = figures["bytes_total"]
        percent = min(99, int(100 * figures["bytes_done"] / total)) if total else 0
    figures["percent"] = percent
    figures["finished"] = job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED)
    return figures


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a queued job under its liveness lock; idempotent: a finished job is left alone, a
    duplicate delivery exits, a crashed one runs again whole."""
    with job_running(kind=IMPORT_JOBS, pk=job_id) as job:
        if job is not None:
            _import(job)
    return ImportJob.objects.select_related("project", "created_by").filter(pk=job_id).first()


@contextlib.contextmanager
def _local_uploads(job: ImportJob) -> Iterator[list[Path]]:
    """The job's uploaded files as local paths: where they are on a local disk, fetched into a
    private temporary folder (removed at the end) from an object store."""
    folder = storage.local_path(job.upload_dir)
    if folder is not None:
        yield [folder / name for name in job.file_names]
        return
    with tempfile.TemporaryDirectory(prefix=f"mast-import-{job.pk}-") as tmp:
        paths = []
        for name in job.file_names:
            storage.fetch(f"{job.upload_dir}/{name}", Path(tmp) / name)
            paths.append(Path(tmp) / name)
        yield paths


def _import(job: ImportJob) -> None:
    ImportJob.objects.filter(pk=job.pk).update(started_at=timezone.now())
    fields: dict[str, Any]
    try:
        with _local_uploads(job) as files:
            result = traces_import(
                project=job.project,
                paths_or_files=files,
                format=job.format,
                by=job.created_by,
                job=job,
                progress=lambda p: _write_progress(job.pk, p),
                import_rest=job.import_rest,
            )
    except TraceImportError as e:
        fields = {"status": ImportJob.Status.FAILED, "failure": ImportJob.Failure.REFUSED, "error": str(e)}
        fields.update(n_imported=0, n_duplicates=0, n_merged=0, report=e.files)
        storage.delete_tree(job.upload_dir)  # the same input would be refused again
    except Exception as e:  # noqa: BLE001 - a job must end in a state a person can read
        if database_connection_lost(e):
            # Not the import's fault: left running, its lock gone with the connection, the sweep
            # runs it again (MAST_JOB_MAX_ATTEMPTS bounds how often).
            logger.warning("import job %s lost its database connection; the sweep runs it again", job.pk)
            raise
        logger.exception("import job %s crashed", job.pk)
        fields = {"status": ImportJob.Status.FAILED, "failure": ImportJob.Failure.STOPPED}
        fields["error"] = f"internal error: {type(e).__name__}: {e}"
    else:
        fields = {
            "status": ImportJob.Status.DONE,
            "n_imported": result.imported,
            "n_duplicates": result.duplicates,
            "n_merged": result.merged,
            "report": result.files,
            "bytes_done": job.bytes_total,
            "error": "",
        }
        storage.delete_tree(job.upload_dir)  # stored in the database now
    fields["finished_at"] = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(**fields)
    storage.delete(_progress_name(job.pk))


def _check_retryable(job: ImportJob) -> None:
    if job.failure == ImportJob.Failure.REFUSED:
        raise JobNotRetryable("This upload was refused and deleted: fix the file and upload it again.")
    if not job.upload_dir or not storage.exists_tree(job.upload_dir):
        hours = settings.MAST_IMPORT_KEEP_FAILED_HOURS
        raise JobNotRetryable(f"The upload was deleted {hours:g} hours after the failure: upload the files again.")


def import_job_retry(*, job: ImportJob) -> ImportJob:
    """Queue a failed import again with its kept upload (the same job). Raises JobNotRetryable."""
    return job_retry(
        kind=IMPORT_JOBS,
        pk=job.pk,
        check=_check_retryable,
        fields={
            "failure": "",
            "bytes_done": 0,
            "n_imported": 0,
            "n_duplicates": 0,
            "n_merged": 0,
            "report": [],
            "started_at": None,
        },
    )


def import_upload_kept_until(*, job: ImportJob) -> datetime | None:
    """When the sweep deletes a failed job's kept upload (None if there is none)."""
    if not job.can_retry or job.finished_at is None:
        return None
    return job.finished_at + timedelta(hours=settings.MAST_IMPORT_KEEP_FAILED_HOURS)


def _reset_attempt(job: ImportJob) -> None:
    storage.delete(_progress_name(job.pk))  # the rows rolled back with the dead connection


def _last_change(folder: str) -> float | None:
    """When anything in the upload folder last changed (a local folder's own time counts: an
    upload being written has created it first); None if it is gone."""
    times = [t.timestamp() for name in storage.names_under(folder) if (t := storage.modified(name))]
    path = storage.local_path(folder)
    with contextlib.suppress(OSError):
        if path is not None:
            times.append(path.stat().st_mtime)
    return max(times) if times else None


def _orphan_uploads(now: datetime) -> list[str]:
    """Upload folders with no job: their request died before it committed (a killed web process,
    a lost database), so no job will ever read them. A folder is an orphan only when nothing in it
    changed for MAST_IMPORT_ORPHAN_MINUTES: an upload still being written has no visible job yet."""
    numbered = {int(name): f"{IMPORTS}/{name}" for name in storage.folders_under(IMPORTS) if name.isdigit()}
    if not numbered:
        return []
    known = set(ImportJob.objects.filter(pk__in=list(numbered)).values_list("pk", flat=True))
    quiet_since = now.timestamp() - 60 * float(settings.MAST_IMPORT_ORPHAN_MINUTES)
    orphans = []
    for pk, folder in numbered.items():
        if pk in known:
            continue
        changed = _last_change(folder)
        if changed is not None and changed < quiet_since:
            orphans.append(folder)
    return orphans


def _delete_old_uploads(now: datetime) -> None:
    """Housekeeping of the import sweep: a stopped job's upload after MAST_IMPORT_KEEP_FAILED_HOURS
    (kept for a retry until then), and orphaned upload folders (``_orphan_uploads``)."""
    for folder in _orphan_uploads(now):
        logger.warning("upload folder %s has no import job (its request died); removed", folder)
        storage.delete_tree(folder)
    before = now - timedelta(hours=settings.MAST_IMPORT_KEEP_FAILED_HOURS)
    old = ImportJob.objects.filter(
        status=ImportJob.Status.FAILED, failure=ImportJob.Failure.STOPPED, finished_at__lt=before
    ).exclude(upload_dir="")
    for pk, folder in old.values_list("pk", "upload_dir"):
        storage.delete_tree(folder)
        ImportJob.objects.filter(pk=pk).update(upload_dir="")  # no retry without it (ImportJob.can_retry)


def _send(job_id: int) -> None:
    task_send("traces.import_job", job_id)


IMPORT_JOBS = JobKind(
    name="import",
    lock_class=0x4D414A49,  # "MAJI"; the import's per-project transaction lock uses 0x4D415354
    model=ImportJob,
    send=_send,
    reset=_reset_attempt,
    stopped_message="the worker stopped {n} times while importing; retry, or import smaller files",
    failed_fields={"failure": ImportJob.Failure.STOPPED},
    housekeeping=_delete_old_uploads,
)
