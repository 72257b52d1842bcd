"""The Celery app. Job state lives in our own tables; tasks live in each area's tasks module."""

import os

from celery import Celery, bootsteps
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")

app = Celery("mast_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The task modules, imported by a worker when it starts (SweepOnConnect below sends their sweeps,
# which pick up the jobs a dead worker left). A web process imports a task module where it sends
# the task, so loading Django does not load the judge's model clients or scikit-learn.
app.conf.imports = (
    "traces.jobs",
    "traces.importing.tasks",
    "annotations.judge.tasks",
    "annotations.releases.tasks",
    "annotations.monitoring.tasks",
    "annotations.corpus.tasks",
    "traces.search.tasks",
    "traces.live.tasks",
)

# The sweeps that bring back the jobs of a dead worker (traces/jobs.py; annotations/judge/tasks.py).
# Each repeats with a countdown while it has work; the jobs sweep, sent on connect, also sends every
# queued job's task again (a restarted broker may have lost it; a duplicate exits at once).
SWEEPS = {
    "traces.jobs_sweep": {"resend_queued": True},
    "annotations.judge_sweep": {},
    "annotations.alerts_sweep": {},
    "annotations.behaviour_sweep": {},
    "traces.search_index": {},
    "traces.live_assemble": {},
}
# A countdown message is delivered at once to one worker, which holds it (reserved, unacknowledged)
# until it is due: if that worker is killed, the sweep's next run waits for Redis's visibility
# timeout (15 minutes) and the jobs the dead worker held wait with it, though other workers live.
# So every worker also sends a one-off sweep of each kind (no repeat: no chain multiplies) every
# MAST_JOB_SWEEP_SECONDS; found by tests/test_cluster.py (two workers, one killed mid judge run).
BACKSTOP_SWEEPS = {
    "traces.jobs_sweep": {"repeat": False},
    "annotations.judge_sweep": {"repeat": False},
    "annotations.alerts_sweep": {"repeat": False},  # alerts: evaluate the rules due (it has no chain)
    "annotations.behaviour_sweep": {"repeat": False},  # behaviour searches whose worker died
    "traces.search_index": {"repeat": False},  # new steps into the corpus search's index
}
# Live traces whose quiet period is over are looked for more often (MAST_LIVE_SWEEP_SECONDS): the
# lag from a trace's last span to it being listed is the quiet period plus up to this
LIVE_SWEEP = "traces.live_assemble"


class SweepOnConnect(bootsteps.StartStopStep):
    """Send the sweeps every time the worker's consumer connects to the broker: when the worker
    starts (it picks up what a dead predecessor left), and again after the broker came back. A
    worker that loses its broker connection drops the countdown messages it held, the sweeps' next
    runs among them (celery's Consumer.on_close clears its timer), and a restarted Redis without
    persistence has lost every message it held: without this, the jobs whose messages were lost
    would wait for the next worker start (tests/test_crash_recovery.py)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, c) -> None:
        from django.conf import settings

        for name, kwargs in SWEEPS.items():
            c.app.send_task(name, kwargs=kwargs, countdown=1)

        def backstop() -> None:
            for name, kwargs in BACKSTOP_SWEEPS.items():
                c.app.send_task(name, kwargs=kwargs)

        # the consumer's timer is cleared when its connection closes, and this runs again on connect
        c.timer.call_repeatedly(float(settings.MAST_JOB_SWEEP_SECONDS), backstop)
        c.timer.call_repeatedly(float(settings.MAST_LIVE_SWEEP_SECONDS), lambda: c.app.send_task(LIVE_SWEEP))


app.steps["consumer"].add(SweepOnConnect)

# How often a threads-pool worker's event loop wakes up at the least (seconds); see below.
THREADS_POOL_TICK = 0.05


def _tick() -> None:
    """Nothing to do: the wake-up itself is the point."""


@worker_ready.connect
def _keep_threads_pool_consuming(sender=None, **kwargs) -> None:
    """Work around celery#6941: with the threads pool and late acks, a worker that reaches its
    prefetch limit stops asking Redis for messages, and asks again only when its event loop next
    wakes up, which can be seconds later (the acks happen in the pool's threads, which do not wake
    the loop). Judge runs hit this as soon as two workers share a run: a finished trace's successor
    sat in Redis for up to 10 s. A short repeating timer keeps the loop turning, so the worker
    consumes again within THREADS_POOL_TICK of a task finishing (bench/bench_judge.py --workers 2)."""
    pool = getattr(sender, "pool", None)
    timer = getattr(sender, "timer", None)
    if isinstance(pool, ThreadTaskPool) and timer is not None:
        timer.call_repeatedly(THREADS_POOL_TICK, _tick)
