"""Judge throughput: 1,000 traces, a local chat-completions server answering in 300 ms, concurrency 16.

Run: .venv/bin/python bench/bench_judge.py [--traces 1000] [--latency 0.3] [--concurrency 16] [--workers N] [--keep]

1. Creates a fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_judge), migrates it,
   and makes N traces of 6 steps each (about 3 KB of text per trace).
2. Starts the scripted chat-completions server (tests/llm_server.py) on 127.0.0.1: every answer
   takes --latency seconds and is a valid judge answer.
3. Starts real Celery workers (--workers processes, default one per core, each -P threads with
   enough threads) on Redis (CELERY_BROKER_URL, default redis://127.0.0.1:6379/13) and queues a judge run with the given
   concurrency. Times it from queueing to the run's end; checks every trace has exactly one
   annotation (zero duplicates) and every item is done (zero lost).
4. The same again with 10% of requests failing transiently (half HTTP 500, half HTTP 429 with
   retry-after-ms: 100), answered at once; the judge retries them with backoff.

Ideal time = N x latency / concurrency (18.75 s for the defaults); the target is within 1.15x.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchdb import (  # bench/ is on sys.path when run as a script
    bench_env,
    create_bench_db,
    django_setup,
    drop_bench_db,
    proc_cpu_seconds,
)

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_judge"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--fail-share", type=float, default=0.10)
    ap.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes, each -P threads (default: one per core, as README advises)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the bench database")
    ap.add_argument("--db", default=BENCH_DB, help="name of the bench database (dropped at the end)")
    ap.add_argument("--redis-db", type=int, default=13, help="Redis database number of the broker")
    args = ap.parse_args()
    # A plain SIGTERM (e.g. from `timeout`) must still stop the workers in the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    env = bench_env(
        args.db,
        CELERY_BROKER_URL=broker,
        MAST_JUDGE_BACKOFF_BASE="0.1",
        MAST_JUDGE_BACKOFF_CAP="2",
        LOG_LEVEL="WARNING",
    )
    create_bench_db(env)
    django_setup(env)
    from django.db import connection

    from annotations.judge.runs import judge_run_create
    from annotations.models import Annotation, JudgeItem, JudgeRun
    from taxonomy.services import taxonomy_seed_mast
    from tests.llm_server import LLMServer, Reply, Status, codes_of, good_answer
    from traces.models import Project, Step, Trace

    version = taxonomy_seed_mast()
    project = Project.objects.create(slug="bench", name="Judge bench", taxonomy_version=version)
    t0 = time.perf_counter()
    traces = Trace.objects.bulk_create(
        Trace(
            project=project,
            title=f"bench {k}",
            format="plaintext",
            raw_text=f"trace {k}",
            size_bytes=3000,
            content_hash=hashlib.sha256(f"bench:{k}".encode()).hexdigest(),
            n_steps=6,
        )
        for k in range(args.traces)
    )
    Step.objects.bulk_create(
        (
            Step(
                trace=t,
                index=i,
                agent=("Planner", "Coder", "Tester")[i % 3],
                line_start=i + 1,
                line_end=i + 1,
                content=f"step {i} of trace {t.pk}: " + "the agent writes some code and runs the tests. " * 10,
            )
            for t in traces
            for i in range(6)
        ),
        batch_size=2000,
    )
    print(f"made {args.traces} traces with 6 steps each in {time.perf_counter() - t0:.1f} s")

    rng = random.Random(7)
    fail = {"share": 0.0}

    def answer(body):
        if fail["share"] and rng.random() < fail["share"]:
            if rng.random() < 0.5:
                return Status(500, {"error": {"message": "injected server error"}})
            return Status(429, {"error": {"message": "injected rate limit"}}, headers={"retry-after-ms": "100"})
        codes = codes_of(body)
        return Reply(good_answer(codes, codes[:1]), delay=args.latency)

    llm = LLMServer(default=answer).start()
    worker_log = Path("/tmp/mast_bench_judge_worker.log")
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "mast_site", "purge", "-f"],
        cwd=REPO,
        env=env,
        capture_output=True,
        check=False,
    )
    threads = max(args.concurrency // args.workers + 4, 8)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "mast_site",
                "worker",
                "-l",
                "WARNING",
                "-P",
                "threads",
                f"--concurrency={threads}",
                "-n",
                f"bench{w}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO,
            env=env,
            stdout=worker_log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for w in range(args.workers)
    ]
    print(f"{args.workers} worker process(es), -P threads --concurrency={threads} each")
    ideal = args.traces * args.latency / args.concurrency
    results = []
    try:
        # Wait until every worker says it is ready (on a loaded machine that takes tens of seconds),
        # so the timings below do not include a worker's start-up.
        from mast_site.celery import app as celery_app

        deadline = time.monotonic() + 180
        t_ready = time.perf_counter()
        while len(celery_app.control.ping(timeout=1.0) or []) < args.workers:
            if time.monotonic() > deadline:
                sys.exit("the bench workers were not ready after 180 s; see " + str(worker_log))
        print(f"workers ready after {time.perf_counter() - t_ready:.1f} s")
        for label, share, model in (
            ("no faults", 0.0, "bench-model"),
            (f"{args.fail_share:.0%} transient faults", args.fail_share, "bench-model-faults"),
        ):
            fail["share"] = share
            seen = llm.n_requests
            llm.max_in_flight = 0
            t = time.perf_counter()
            cpu0 = sum(proc_cpu_seconds(w.pid) for w in workers)
            load0 = os.getloadavg()[0]
            run = judge_run_create(
                project=project,
                by=None,
                provider="openai",
                base_url=llm.url,
                model=model,
                concurrency=args.concurrency,
                timeout=30,
            )
            first = None
            while True:
                run.refresh_from_db()
                if first is None and run.n_done:
                    first = time.perf_counter() - t
                if not run.is_active:
                    break
                print(f"\r  {label}: {run.n_done + run.n_failed}/{run.n_total}", end="", file=sys.stderr, flush=True)
                time.sleep(0.1)
            elapsed = time.perf_counter() - t
            cpu = sum(proc_cpu_seconds(w.pid) for w in workers) - cpu0
            print(file=sys.stderr)
            per_trace = Annotation.objects.filter(rater=run.rater).values_list("trace_id", flat=True)
            n_ann = per_trace.count()
            duplicates = n_ann - len(set(per_trace))
            lost = JudgeItem.objects.filter(run=run).exclude(state="done").count()
            requests = llm.n_requests - seen
            # Where the wall time goes beyond the ideal: the start (queueing to the first request
            # reaching the model server) and the tail (the last request sent to the run's end).
            with llm.lock:
                sent = llm.times[seen:]
            t_mono = time.monotonic() - (time.perf_counter() - t)
            first_request = sent[0] - t_mono if sent else 0.0
            last_request = sent[-1] - t_mono if sent else 0.0
            results.append((label, elapsed, run, duplicates, lost, requests, llm.max_in_flight))
            print(
                f"{label}: {run.n_total} traces in {elapsed:.2f} s = {elapsed / ideal:.2f}x the ideal {ideal:.2f} s "
                f"({'within' if elapsed <= 1.15 * ideal else 'OVER'} 1.15x); state {run.state}"
            )
            print(
                f"  done {run.n_done}, failed {run.n_failed}, lost (not done) {lost}, duplicate annotations "
                f"{duplicates}, annotations {n_ann}"
            )
            print(
                f"  HTTP requests {requests} ({requests - run.n_total} retries), max in flight {llm.max_in_flight}, "
                f"{run.n_total / elapsed:.1f} traces/s; first label after {first or 0:.2f} s "
                f"(one answer takes {args.latency:.2f} s)"
            )
            print(
                f"  start: first request reached the model server after {first_request:.2f} s; tail: the last "
                f"request was sent at {last_request:.2f} s, {elapsed - last_request:.2f} s before the run's end"
            )
            print(
                f"  worker CPU {cpu:.1f} s ({1000 * cpu / run.n_total:.1f} ms per trace); machine load average "
                f"(2 cores) at the start {load0:.1f}"
            )
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        llm.stop()
        connection.close()
        if not args.keep:
            drop_bench_db(env)
    bad = [r for r in results if r[3] or r[4] or r[2].state != JudgeRun.State.DONE]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
