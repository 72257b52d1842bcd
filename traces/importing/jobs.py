"""Import jobs: web and API uploads, stored and then imported in the background.

``import_job_create`` saves the uploaded files to MEDIA_ROOT/imports/<job id>/ and queues the
Celery task after commit; the task calls ``import_job_run``, which runs ``traces_import`` and
puts the final figures on the ImportJob row.

Progress: the import holds one transaction on the default connection, so progress rows written
through it would stay invisible until the end. The job writes its progress to a small JSON file
beside the uploads (MEDIA_ROOT/imports/<id>.progress.json, replaced atomically); pages and the
API read it while the job runs (``import_job_progress``). This works the same on PostgreSQL and
on the SQLite demo (where a second writer connection would block on the import's write lock)
and needs no extra service: the worker and the web process already share MEDIA_ROOT for the
uploaded files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from traces.importing.results import ImportProgress, TraceImportError
from traces.importing.service import IMPORT_FORMATS, traces_import
from traces.importing.sources import import_limits
from traces.models import ImportJob, Project

logger = logging.getLogger(__name__)

_UPLOAD_CHUNK = 1024**2


def import_dir() -> Path:
    return Path(settings.MEDIA_ROOT) / "imports"


def _progress_path(job_id: int) -> Path:
    return import_dir() / f"{job_id}.progress.json"


def _safe_upload_name(name: str, taken: set[str]) -> str:
    from django.utils.text import get_valid_filename

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


def import_job_create(*, project: Project, by: Any, files: list[Any], format: str = "auto") -> ImportJob:
    """Save uploaded files to MEDIA_ROOT/imports/<job id>/ and queue the job (after commit).

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
        size = getattr(f, "size", 0) or 0
        if size > max_file:
            name = os.path.basename(f.name)
            raise TraceImportError(f"{name}: {size:,} bytes; the limit per file is {max_file:,} bytes")
        total += size
    if total > max_total:
        raise TraceImportError(f"the upload holds {total:,} bytes; the limit per import is {max_total:,} bytes")

    from traces.importing.tasks import import_job as import_job_task

    with transaction.atomic():
        job = ImportJob.objects.create(project=project, created_by=by, format=format, bytes_total=total)
        folder = import_dir() / str(job.pk)
        folder.mkdir(parents=True, exist_ok=True)
        names: list[str] = []
        taken: set[str] = set()
        try:
            for f in files:
                name = _safe_upload_name(f.name, taken)
                with open(folder / name, "wb") as out:
                    if hasattr(f, "chunks"):
                        for chunk in f.chunks(_UPLOAD_CHUNK):
                            out.write(chunk)
                    else:
                        shutil.copyfileobj(f, out, _UPLOAD_CHUNK)
                names.append(name)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        job.upload_dir = str(folder)
        job.file_names = names
        job.save(update_fields=["upload_dir", "file_names"])
        transaction.on_commit(lambda: import_job_task.delay(job.pk))
    return job


def _write_progress(job_id: int, p: ImportProgress) -> None:
    path = _progress_path(job_id)
    tmp = path.with_suffix(".tmp")
    data = {
        "bytes_done": p.bytes_done,
        "bytes_total": p.bytes_total,
        "n_imported": p.imported,
        "n_duplicates": p.duplicates,
        "current": p.current,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # progress is a courtesy; the import itself must not fail over it


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
        with contextlib.suppress(OSError, ValueError):
            figures.update(json.loads(_progress_path(job.pk).read_text(encoding="utf-8")))
    if job.status == ImportJob.Status.DONE:
        percent = 100
    else:
        total = figures["bytes_total"]
        percent = min(99, int(100 * figures["bytes_done"] / total)) if total else 0
    figures["percent"] = percent
    figures["finished"] = job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED)
    return figures


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued job; idempotent: a finished job is left alone, a crashed one runs again whole."""
    job = ImportJob.objects.select_related("project", "created_by").get(pk=job_id)
    if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
        return job
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING, started_at=timezone.now())
    job.status = ImportJob.Status.RUNNING
    files = [Path(job.upload_dir) / name for name in job.file_names]
    fields: dict[str, Any]
    try:
        result = traces_import(
            project=job.project,
            paths_or_files=files,
            format=job.format,
            by=job.created_by,
            job=job,
            progress=lambda p: _write_progress(job.pk, p),
        )
    except TraceImportError as e:
        fields = {"status": ImportJob.Status.FAILED, "error": str(e), "n_imported": 0, "n_duplicates": 0}
    except Exception as e:  # noqa: BLE001 - a job must end in a state a person can read
        logger.exception("import job %s crashed", job.pk)
        fields = {"status": ImportJob.Status.FAILED, "error": f"internal error: {type(e).__name__}: {e}"}
    else:
        fields = {
            "status": ImportJob.Status.DONE,
            "n_imported": result.imported,
            "n_duplicates": result.duplicates,
            "bytes_done": job.bytes_total,
            "error": "",
        }
        shutil.rmtree(job.upload_dir, ignore_errors=True)  # stored in the database now
    fields["finished_at"] = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(**fields)
    _progress_path(job.pk).unlink(missing_ok=True)
    job.refresh_from_db()
    return job
