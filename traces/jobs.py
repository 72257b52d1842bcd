"""Background jobs that survive a killed worker: a liveness lock per running job, a sweep, a retry.

Import jobs (``traces.importing.jobs``) and release builds (``annotations.releases.services``)
follow these rules; judge runs have their own per-item leases (``annotations.judge.runs``).

* A job is a row with ``status`` queued -> running -> done | failed, ``attempts`` (attempts
  started) and ``queued_at`` (when its task was last sent). Each kind of job registers a
  :class:`JobKind` (``job_kind_register``, from its app's ``ready()``), so this module never
  imports the apps above it.
* **The lock.** The task that runs a job first takes the job's lock (``job_running``) and holds it
  until the job has reached done or failed. The lock dies with the worker: it is a
  session-level advisory lock ``pg_try_advisory_lock(kind.lock_class, job id)`` on the worker's
  connection, which the server releases the moment that connection drops (the import's own
  per-project lock is transaction-level with another class id). A delivery that cannot take
  the lock exits quietly: the job is running in
  another worker, and two copies of one job never run at once.
* **An attempt.** Holding the lock, the task marks the job running and counts one attempt. A job
  found running by the task itself (its last worker died before any sweep noticed) is cleaned up
  first, like the sweep does.
* **The sweep** (task ``traces.jobs_sweep``) runs when a worker connects to the broker (it
  starts, or the broker came back) and then every ``MAST_JOB_SWEEP_SECONDS`` while any job is
  queued or running (a countdown message, which the worker that reserved it holds until it is due;
  so every live worker also sends a one-off sweep every ``MAST_JOB_SWEEP_SECONDS``, in case the
  worker holding the next one died: mast_site/celery.py). A running job whose lock is free
  lost its worker: the kind's ``reset`` removes what the attempt left (the database part rolled
  back with the dead connection), and the job is queued again, or, once ``MAST_JOB_MAX_ATTEMPTS``
  attempts have died, marked failed with the kind's message. A job queued for longer than
  ``MAST_JOB_QUEUED_RESEND_SECONDS`` is sent again (its message may have been prefetched by a
  worker that died), and on a (re)connect every queued job is (a restarted broker may have lost
  its messages); a duplicate delivery is harmless (the lock, then the status, stop it).
* **Retry** (``job_retry``) puts a failed job back in the queue as a fresh job (0 attempts).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from celery import current_app, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, models, transaction
from django.db.models import F
from django.utils import timezone

from traces.api_errors import ProductError

logger = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
ACTIVE = (QUEUED, RUNNING)

# pg_try_advisory_lock's two-int form takes int4 keys; ids beyond that wrap (two jobs sharing a
# lock would only make the sweep wait for the other one, never run a job twice).
_INT4 = 2**31


class JobNotRetryable(ProductError):
    """A retry of a job that is not failed, or whose inputs are gone."""

    status = 409


@dataclass(frozen=True)
class JobKind:
    """One kind of job. ``model`` has status, attempts, queued_at, error and finished_at."""

    name: str  # "import", "release": in logs and lock file names
    lock_class: int  # the advisory lock's class id; one per kind, never the import's per-project 0x4D415354
    model: type[models.Model]
    send: Callable[[int], None]  # send the job's task (called after commit)
    reset: Callable[[Any], None]  # remove what a dead attempt left outside the database
    stopped_message: str  # "... {n} times ..."; the error of a job whose workers kept dying
    failed_fields: dict[str, Any] = field(default_factory=dict)  # also set when the sweep fails a job
    housekeeping: Callable[[datetime], None] | None = None  # run by every sweep (e.g. delete old uploads)


_KINDS: dict[str, JobKind] = {}


def task_send(name: str, *args: Any, countdown: float | None = None) -> None:
    """Queue the task registered under `name` (each area's tasks module gives its tasks stable names).

    By name, so a module that queues work never imports the module that runs it: no import cycle
    between an area's jobs or dispatch and its tasks, and a web process does not load a worker's
    dependencies (model clients, scikit-learn). tests/test_task_names.py checks every name sent
    here is a registered task."""

    current_app.send_task(name, args=list(args), countdown=countdown)


def job_kind_register(kind: JobKind) -> None:
    """Make the sweep look after `kind`; registering a name again replaces it."""
    _KINDS[kind.name] = kind


def job_kinds() -> tuple[JobKind, ...]:
    return tuple(_KINDS.values())


def max_attempts() -> int:
    return int(settings.MAST_JOB_MAX_ATTEMPTS)


def sweep_seconds() -> float:
    return float(settings.MAST_JOB_SWEEP_SECONDS)


# ---------------------------------------------------------------- the lock


@contextlib.contextmanager
def job_lock(*, kind: JobKind, pk: int) -> Iterator[bool]:
    """Hold the job's liveness lock for the with-block; yields False if another worker holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [kind.lock_class, pk % _INT4])
        held = bool(cursor.fetchone()[0])
        if held:
            # A worker whose host vanishes sends no FIN: make the server notice within about 2 minutes
            # (the defaults wait hours), so its lock, and so its job, are freed.
            cursor.execute(
                "SELECT set_config('tcp_keepalives_idle', '60', false), "
                "set_config('tcp_keepalives_interval', '10', false), set_config('tcp_keepalives_count', '6', false)"
            )
    try:
        yield held
    finally:
        if held:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [kind.lock_class, pk % _INT4])
            except Exception:  # noqa: BLE001 - a broken connection: dropping it releases the lock
                logger.warning("could not unlock %s job %s; closing the connection to release it", kind.name, pk)
                connection.close()


def job_lock_held(*, kind: JobKind, pk: int) -> bool:
    """Whether some worker (this process included) holds the job's lock right now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s AND objid = %s AND objsubid = 2)",
            [kind.lock_class, pk % _INT4],
        )
        return bool(cursor.fetchone()[0])


def database_connection_lost(exc: BaseException) -> bool:
    """Whether `exc` came of losing the database connection (the server restarted, shut down or
    dropped it) rather than of the job: then the job must not be failed for it. The attempt's work
    rolled back with the connection, and its lock went with it: the sweep runs the job again.

    Told by the SQLSTATE anywhere in the exception's chain (class 08, connection exception; 57P,
    the server shutting down or ending the session), or, for an error without one ("the connection
    is closed"), by this thread's connection being unusable; psycopg's own OperationalError with no
    SQLSTATE ("consuming input failed: server closed the connection unexpectedly", raised on a
    connection the job opened beside Django's, such as the import's COPY writer) is always one."""

    seen: BaseException | None = exc
    while seen is not None:
        state = getattr(seen, "sqlstate", None)
        if state and (state.startswith("08") or state.startswith("57P")):
            return True
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, psycopg.OperationalError) and not getattr(exc, "sqlstate", None):
        # psycopg's own connection failing under libpq (no server error to give a code): the
        # COPY writer's connection, opened beside Django's, dropped mid-statement
        return True
    if not isinstance(exc, OperationalError | InterfaceError) or getattr(exc.__cause__, "sqlstate", None):
        return False
    return connection.connection is None or not connection.is_usable()


# ---------------------------------------------------------------- running a job


def _send_after_commit(kind: JobKind, pk: int) -> None:
    transaction.on_commit(lambda: kind.send(pk))


def job_queue_after_commit(*, kind: JobKind, pk: int) -> None:
    """Send a new (or retried) job's task once the transaction commits, and start the sweep that
    watches it: if its worker dies while another worker lives on, no worker start would sweep."""

    def send() -> None:
        kind.send(pk)
        jobs_sweep_task.apply_async(countdown=sweep_seconds())

    transaction.on_commit(send)


def _fail_stopped(kind: JobKind, job: Any, now: datetime) -> None:
    message = kind.stopped_message.format(n=job.attempts)
    kind.model.objects.filter(pk=job.pk).update(status=FAILED, error=message, finished_at=now, **kind.failed_fields)
    logger.warning("%s job %s failed: %s", kind.name, job.pk, message)


def _claim(kind: JobKind, pk: int) -> Any | None:
    now = timezone.now()
    with transaction.atomic():
        job = kind.model.objects.select_for_update().filter(pk=pk).first()
        if job is None or job.status not in ACTIVE:
            return None  # finished, or a stale message of a deleted job
        if job.status == RUNNING:  # the last attempt's worker died before a sweep noticed
            kind.reset(job)
            if job.attempts >= max_attempts():
                _fail_stopped(kind, job, now)
                return None
        kind.model.objects.filter(pk=pk).update(status=RUNNING, attempts=F("attempts") + 1)
    job.refresh_from_db()
    return job


@contextlib.contextmanager
def job_running(*, kind: JobKind, pk: int) -> Iterator[Any | None]:
    """Run a job under its lock: yields the job, marked running with one more attempt, or None when
    there is nothing to run (another delivery holds the lock; the job is finished or gone; its
    attempts are used up, and it is marked failed here). The with-block must leave the job done
    or failed: the lock is released when it exits."""
    with job_lock(kind=kind, pk=pk) as held:
        if not held:
            logger.info("%s job %s is running in another worker; this delivery exits", kind.name, pk)
            yield None
            return
        yield _claim(kind, pk)


# ---------------------------------------------------------------- sweep and retry


def job_recover(*, kind: JobKind, pk: int, now: datetime | None = None) -> Any | None:
    """A running job whose lock is free lost its worker: queue it again, or fail it after
    MAST_JOB_MAX_ATTEMPTS attempts. Returns the job as it is now; a live or finished job is untouched."""
    now = now or timezone.now()
    with transaction.atomic():
        job = kind.model.objects.select_for_update().filter(pk=pk).first()
        # Asked again under the row lock: a task that took the lock since holds it now, and one
        # that takes it later waits for this row, then finds it queued.
        if job is None or job.status != RUNNING or job_lock_held(kind=kind, pk=pk):
            return job
        kind.reset(job)
        if job.attempts >= max_attempts():
            _fail_stopped(kind, job, now)
        else:
            logger.warning("%s job %s lost its worker (attempt %s); queued again", kind.name, pk, job.attempts)
            kind.model.objects.filter(pk=pk).update(status=QUEUED, queued_at=now)
            _send_after_commit(kind, pk)
    job.refresh_from_db()
    return job


def _sweep_kind(kind: JobKind, now: datetime, resend_all: bool = False) -> bool:
    rows = list(kind.model.objects.filter(status__in=ACTIVE).values_list("pk", "status", "queued_at"))
    resend_before = now if resend_all else now - timedelta(seconds=float(settings.MAST_JOB_QUEUED_RESEND_SECONDS))
    for pk, status, queued_at in rows:
        if status == RUNNING:
            if not job_lock_held(kind=kind, pk=pk):
                job_recover(kind=kind, pk=pk, now=now)
        elif queued_at <= resend_before:
            with transaction.atomic():
                if kind.model.objects.filter(pk=pk, status=QUEUED).update(queued_at=now):
                    _send_after_commit(kind, pk)
    if kind.housekeeping is not None:
        kind.housekeeping(now)
    return bool(rows)


def jobs_sweep(*, now: datetime | None = None, resend_queued: bool = False) -> bool:
    """Recover the jobs of every registered kind; True while some job is queued or running.

    ``resend_queued``: send every queued job's task again, however recently it was sent (the
    broker may have lost it: a worker sweeps so when it (re)connects to the broker)."""
    now = now or timezone.now()
    active = False
    for kind in job_kinds():
        try:
            active = _sweep_kind(kind, now, resend_queued) or active
        except Exception:  # noqa: BLE001 - one kind's bug must not stop the sweep of the others
            logger.exception("the sweep of %s jobs failed", kind.name)
            active = True  # try again later
    return active


def job_retry(
    *, kind: JobKind, pk: int, check: Callable[[Any], None] | None = None, fields: dict[str, Any] | None = None
) -> Any:
    """Queue a failed job again as a fresh job (0 attempts, no error), the same row and number.
    `check(job)` runs under the row lock and raises JobNotRetryable when the job cannot run again;
    `fields` are the kind's own figures to reset."""
    with transaction.atomic():
        job = kind.model.objects.select_for_update().get(pk=pk)
        if job.status != FAILED:
            raise JobNotRetryable(f"This {kind.name} is {job.status}, not failed: there is nothing to retry.")
        if check is not None:
            check(job)
        kind.model.objects.filter(pk=pk).update(
            status=QUEUED, attempts=0, error="", queued_at=timezone.now(), finished_at=None, **(fields or {})
        )
        job_queue_after_commit(kind=kind, pk=pk)
    job.refresh_from_db()
    return job


@shared_task(name="traces.jobs_sweep", acks_late=True, ignore_result=True)
def jobs_sweep_task(resend_queued: bool = False, repeat: bool = True) -> None:
    """Recover import and release jobs whose worker died; repeats while any job is queued or running.
    A worker sends it with ``resend_queued`` when it connects to the broker, and with
    ``repeat=False`` every MAST_JOB_SWEEP_SECONDS as a backstop (mast_site/celery.py)."""
    if jobs_sweep(resend_queued=resend_queued) and repeat:
        jobs_sweep_task.apply_async(countdown=sweep_seconds())
