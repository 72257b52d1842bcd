"""Handing out a run's work: claiming items, topping up, finishing, and where work is sent.

(The sweep that brings back a dead worker's items, ``judge_sweep``, lives in ``runs.py``: it starts
queued runs, and this module must not import the module that imports it.)

How a run moves (one Celery task per trace, at most ``run.concurrency`` in flight):

1. ``judge_run_create`` (``runs.py``) freezes the trace selection as items (pending) and queues
   the start; ``judge_run_start`` moves it to running and calls ``judge_run_dispatch``.
2. ``judge_run_dispatch`` (under the run's row lock) counts the running items, claims pending
   ones up to the concurrency limit (state running, a lease, ``claim`` + 1) and enqueues one
   ``annotations.prelabel_trace(item_id, claim)`` task for each after commit. Every finished item
   claims its successor in its own result transaction (``claim_next``), so the run tops itself
   up; when nothing is pending or running the run is done.
3. ``judge_item_process`` (``worker.py``) builds the prompt, answers from the cache or calls the
   provider with the retry policy (transient faults back off, permanent ones stop the run), parses
   the answer with one repair request, and writes the annotation + the item's result in ONE
   transaction after re-checking the item's state under lock: a task delivered twice writes one
   result.
4. Crash safety: tasks are acks_late; a claimed item whose lease expired (its worker died) is
   claimed again by ``judge_run_dispatch``; ``runs.judge_sweep`` runs when a worker starts and then
   every lease period while runs are running, so a killed and restarted worker finishes the run.
   A stale duplicate task carries an old ``claim`` number and exits without work.

A whole-run provider (the baseline, ``baseline.py``) is one start task that labels every item
itself, holding the run's liveness lock (``whole_run_lock``, the advisory lock of
``traces.jobs``, released by the server when the worker's connection drops); dispatch only
finishes it, and the sweep, which repeats every ``MAST_JOB_SWEEP_SECONDS`` while such a run is
running, starts it again as soon as it is running and its lock is free (its worker died).

Locks: a result transaction locks its item first and the run row last (its counters are the
final statement, so the run row is held only for the commit); dispatch, sweep and resume lock the
run row and then take items with SKIP LOCKED, so neither ever waits on the other.

Where work goes is the caller's explicit choice, a ``Dispatcher`` passed down the calls: the
services default to ``CELERY`` (tasks after commit); callers that run a run in their own process
(``prelabel --inline``, the demo seed, tests) pass ``INLINE``, which sends nothing: the caller
finds the claimed items in the database and processes them itself (``inline.py``). An argument
rather than a process-wide switch, so no other thread or caller can change where a run's work goes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotations.judge import sql as judge_sql
from annotations.judge.providers import provider_get
from annotations.models import JudgeItem, JudgeRun
from traces.jobs import JobKind, job_lock, task_send
from traces.sqlrows import sql_fetchone

# The liveness lock of a whole-run task (the baseline): only its lock class and name are used
# (traces.jobs.job_lock); the judge sweep, not the jobs sweep, looks after these runs.
WHOLE_RUN = JobKind(
    name="judge-run",
    lock_class=0x4D414A4A,  # "MAJJ"; imports use 0x4D414A49, releases 0x4D414A52
    model=JudgeRun,
    send=lambda pk: None,
    reset=lambda run: None,
    stopped_message="",
)


def whole_run_lock(run_id: int):
    """Hold a whole-run task's liveness lock for the with-block; yields False if another worker holds it."""
    return job_lock(kind=WHOLE_RUN, pk=run_id)


logger = logging.getLogger(__name__)


def lease_seconds(run: JudgeRun) -> float:
    """A claimed item's lease while it waits in the queue: long enough for a request to time out."""
    return float(run.timeout) + float(getattr(settings, "MAST_JUDGE_LEASE_SLACK", 15.0))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "MAST_JUDGE_HEARTBEAT", 10.0))


def running_lease_parts() -> tuple[float, float]:
    """(cap, slack) of a started item's lease: ``min(run timeout, cap) + slack`` seconds."""
    return 3 * heartbeat_seconds(), float(getattr(settings, "MAST_JUDGE_LEASE_SLACK", 15.0))


def running_lease_seconds(run: JudgeRun) -> float:
    """A started item's lease: renewed every heartbeat by the worker that runs it (one missed beat
    or two are tolerated), so the item of a dead worker is claimed again within three heartbeats
    plus the slack, whatever the run's request timeout; a run whose timeout is shorter than that
    keeps its shorter lease (a request cannot outlive it)."""
    cap, slack = running_lease_parts()
    return min(float(run.timeout), cap) + slack


class Dispatcher:
    """Where the services send the work they hand out; called after commit."""

    def start(self, run_id: int) -> None:
        """A run was created or resumed: start it (and keep the sweep going)."""

    def restart(self, run_id: int) -> None:
        """A whole-run provider's run went silent (its worker died): start its task again."""

    def items(self, pairs: Sequence[tuple[int, int]]) -> None:
        """(item id, claim) pairs were claimed: process each."""


class CeleryDispatcher(Dispatcher):
    def start(self, run_id: int) -> None:
        task_send("annotations.judge_run_start", run_id)
        task_send("annotations.judge_sweep", countdown=5)

    def restart(self, run_id: int) -> None:
        task_send("annotations.judge_run_start", run_id)

    def items(self, pairs: Sequence[tuple[int, int]]) -> None:
        for item_id, claim in pairs:
            task_send("annotations.prelabel_trace", item_id, claim)


class InlineDispatcher(Dispatcher):
    """Sends nothing: the caller drives the run in its own process (its loop finds claimed items)."""


class ChainDispatcher(CeleryDispatcher):
    """Keeps the first item handed out for the calling task to process next, in the same thread.

    Every finished trace claims exactly one successor (``claim_next``). Sending it as a new Celery
    task costs a publish, a consume and an ack (milliseconds of the worker's CPU) and up to one
    event-loop tick of the threads pool before a thread picks it up (``mast_site/celery.py``); the
    ``prelabel_trace`` task instead loops on its successor while it has one, for up to
    ``seconds`` (then the successor goes through Celery, so a long run still spreads over workers
    that join later and no message stays unacknowledged near the broker's visibility timeout).
    Crash safety is unchanged: a kept item is claimed (running, leased) in the database like a sent
    one, and the sweep claims it again when its lease expires."""

    def __init__(self, *, seconds: float = 60.0):
        self._deadline = time.monotonic() + seconds
        self.next: tuple[int, int] | None = None

    def items(self, pairs: Sequence[tuple[int, int]]) -> None:
        pairs = list(pairs)
        if pairs and self.next is None and time.monotonic() < self._deadline:
            self.next = pairs.pop(0)
        if pairs:
            super().items(pairs)

    def take(self) -> tuple[int, int] | None:
        pair, self.next = self.next, None
        return pair


CELERY: Dispatcher = CeleryDispatcher()
INLINE: Dispatcher = InlineDispatcher()


def _budget_reached(run: JudgeRun) -> str:
    if run.budget_tokens and run.tokens_in + run.tokens_out >= run.budget_tokens:
        return f"Paused: the budget of {run.budget_tokens:,} tokens is used up ({run.tokens_in + run.tokens_out:,})."
    if run.budget_cost is not None and run.budget_cost > 0 and run.cost >= run.budget_cost:
        return f"Paused: the budget of {run.budget_cost} is used up ({run.cost:.4f})."
    return ""


def judge_run_dispatch(*, run_id: int, reclaim: bool = False, dispatcher: Dispatcher = CELERY) -> int:
    """Top up the run to its concurrency limit; finish it when nothing is left. Returns items claimed.

    With ``reclaim`` (the sweep), running items whose lease expired are first put back to pending."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state != JudgeRun.State.RUNNING:
            return 0
        if not provider_get(run.provider).per_trace:
            if not run.items.filter(state__in=[JudgeItem.State.PENDING, JudgeItem.State.RUNNING]).exists():
                _finish(run)
            return 0
        if reclaim:
            # SKIP LOCKED: an item whose result is being written right now is not ours to take back.
            expired = list(
                JudgeItem.objects.select_for_update(skip_locked=True)
                .filter(run=run, state=JudgeItem.State.RUNNING, lease_until__lt=timezone.now())
                .values_list("id", flat=True)
            )
            JudgeItem.objects.filter(pk__in=expired).update(state=JudgeItem.State.PENDING, lease_until=None)
        return _top_up(run, dispatcher)


def _top_up(run: JudgeRun, dispatcher: Dispatcher) -> int:
    """Claim pending items up to the limit (caller holds the run's row lock in a transaction)."""
    items = JudgeItem.objects.filter(run=run)
    counts = items.aggregate(
        pending=Count("id", filter=Q(state=JudgeItem.State.PENDING)),
        running=Count("id", filter=Q(state=JudgeItem.State.RUNNING)),
    )
    if counts["pending"] == 0:
        if counts["running"] == 0:
            _finish(run)
        return 0
    reason = _budget_reached(run)
    if reason:
        run.state = JudgeRun.State.PAUSED
        run.error = reason
        run.save(update_fields=["state", "error", "updated_at"])
        return 0
    slots = run.concurrency - counts["running"]
    if slots <= 0:
        return 0
    rows = list(items.filter(state=JudgeItem.State.PENDING).order_by("id").values_list("id", "claim")[:slots])
    lease = timezone.now() + timedelta(seconds=lease_seconds(run))
    items.filter(pk__in=[r[0] for r in rows]).update(
        state=JudgeItem.State.RUNNING, lease_until=lease, claim=F("claim") + 1
    )
    pairs = [(item_id, claim + 1) for item_id, claim in rows]
    transaction.on_commit(lambda: dispatcher.items(pairs))
    return len(pairs)


def _finish(run: JudgeRun) -> None:
    done = run.items.filter(state=JudgeItem.State.DONE).count()
    failed = run.items.filter(state=JudgeItem.State.FAILED).count()
    run.n_done, run.n_failed = done, failed
    if done == 0 and failed:
        run.state = JudgeRun.State.FAILED
        first = run.items.filter(state=JudgeItem.State.FAILED).values_list("error", flat=True).first()
        run.error = f"Every item failed ({failed}); the first said: {first}"[:2000]
    else:
        run.state = JudgeRun.State.DONE
    run.finished_at = timezone.now()
    run.save(update_fields=["state", "error", "n_done", "n_failed", "finished_at", "updated_at"])


def run_stop(*, run_id: int, message: str) -> None:
    """A queued or running run fails with `message` (a permanent fault, an untrainable baseline).

    Its claimed items go back to pending at once, so a stopped run shows no item "running": the
    tasks already queued for them find them pending and exit, and a result being written right
    now (its item row locked, hence SKIP LOCKED) still lands as done."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        if run.state in (JudgeRun.State.RUNNING, JudgeRun.State.QUEUED):
            run.state = JudgeRun.State.FAILED
            run.error = message[:2000]
            run.finished_at = timezone.now()
            run.save(update_fields=["state", "error", "finished_at", "updated_at"])
            held = list(
                JudgeItem.objects.select_for_update(skip_locked=True)
                .filter(run=run, state=JudgeItem.State.RUNNING)
                .values_list("id", flat=True)
            )
            JudgeItem.objects.filter(pk__in=held).update(state=JudgeItem.State.PENDING, lease_until=None)


def claim_next(run: JudgeRun, dispatcher: Dispatcher, *, tokens_in: int, tokens_out: int, cost: Decimal) -> bool:
    """One trace finished: hand out one more (each completion frees exactly one slot).

    Called inside the trace's result transaction. The budget is checked here, on the counters as
    this item saw them plus its own use: calls already in flight can overshoot it by at most
    concurrency - 1 traces."""
    statement = claim_next_statement(run, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
    if statement is None:
        return False
    return claim_handed(dispatcher, sql_fetchone(*statement))


def claim_next_statement(run: JudgeRun, *, tokens_in: int, tokens_out: int, cost: Decimal) -> tuple[str, list] | None:
    """``claim_next`` in two halves, for a caller that runs the claim with its other statements
    (``labels.bulk.sql_execute_batch``): the claim's statement (None: the run is not running or its
    budget is used up, the finish check after commit pauses or finishes it), then ``claim_handed``
    with the row it returned."""
    run.tokens_in += tokens_in
    run.tokens_out += tokens_out
    run.cost += cost
    if run.state != JudgeRun.State.RUNNING or _budget_reached(run):
        return None
    return judge_sql.claim_next_statement(run.pk, timezone.now() + timedelta(seconds=lease_seconds(run)))


def claim_handed(dispatcher: Dispatcher, claimed: tuple[int, int] | None) -> bool:
    """The item a claim statement returned (None: nothing was pending) goes to ``dispatcher`` after commit."""
    if claimed is None:
        return False
    pairs = [(claimed[0], claimed[1])]
    transaction.on_commit(lambda: dispatcher.items(pairs))
    return True


def finish_if_idle(run: JudgeRun, dispatcher: Dispatcher) -> None:
    """After a result: when nothing is running any more, let dispatch finish (or pause) the run."""
    if not JudgeItem.objects.filter(run=run, state=JudgeItem.State.RUNNING).exists():
        judge_run_dispatch(run_id=run.pk, dispatcher=dispatcher)
