"""Many processes, no shared disk: saves/s with 1 and 2 web processes, judge throughput with 1 and 2
workers, every process with private folders, sharing only PostgreSQL, Redis and an S3 store.

Run: .venv/bin/python bench/bench_cluster.py [--clients 20] [--seconds 15] [--traces 160] [--latency 0.5]

1. Starts moto_server (tests/s3_server.py, a real S3-protocol process) and a fresh database
   (mast_bench_cluster on DATABASE_URL's server), seeded as bench/bench_saves.py seeds it.
2. Saves: --clients annotators PUT their whole state back to back (no think time) for --seconds,
   first against one gunicorn (-w 1 -k gthread --threads 8), then spread over two such processes.
   Prints saves/s, p50/p95 and errors for each.
3. Judge: a run of --traces traces (6 steps each) against the local OpenAI-protocol server, each
   answer taking --latency seconds, run concurrency 32, on one Celery worker (16 threads), then a
   new run on two. Prints traces/s for each.

On a 2-core machine the second process of each kind competes for the same two cores: the figures
say what a second process buys here, not on a second machine.
"""

from __future__ import annotations

import argparse
import hashlib
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_saves import Client, seed  # bench/ is on sys.path when run as a script
from benchdb import REPO, bench_env, create_bench_db, django_setup, drop_bench_db, free_port, start_gunicorn

sys.path.insert(0, str(REPO))
from tests.processes import WorkerProcess, private_env  # noqa: E402 - after the path
from tests.s3_server import S3Server  # noqa: E402

BENCH_DB = "mast_bench_cluster"


def saves(env: dict, infos: list[dict], n_web: int, seconds: float, scratch: Path) -> str:
    ports, servers = [], []
    try:
        for k in range(n_web):
            port = free_port()
            folder = scratch / f"web-{n_web}-{k}"
            servers.append(start_gunicorn(private_env(env, folder), port=port, workers=1, threads=8, log_dir=folder))
            ports.append(port)
        clients = [Client(ports[i % n_web], info, seconds, (0.0, 0.0), seed=i) for i, info in enumerate(infos)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    lat = sorted(x for c in clients for x in c.latencies)
    errors = sum(len(c.errors) for c in clients)
    p95 = lat[int(0.95 * (len(lat) - 1))] * 1000 if lat else float("nan")
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    return f"{len(lat) / seconds:6.1f} saves/s  p50 {p50:5.1f} ms  p95 {p95:5.1f} ms  errors {errors}"


def judge(env: dict, n_workers: int, args, scratch: Path, llm_url: str, version) -> str:
    from annotations.judge.runs import judge_run_create
    from annotations.models import Annotation, JudgeItem, JudgeRun
    from traces.models import Project, Step, Trace

    project = Project.objects.create(slug=f"judge-{n_workers}", name=f"Judge x{n_workers}", taxonomy_version=version)
    traces = Trace.objects.bulk_create(
        Trace(project=project, title=f"t{k}", format="plaintext", raw_text=f"trace {k}", size_bytes=3000,
              content_hash=hashlib.sha256(f"{project.pk}:{k}".encode()).hexdigest(), n_steps=6)
        for k in range(args.traces)
    )  # fmt: skip
    Step.objects.bulk_create(
        Step(trace=t, index=i, agent=("Planner", "Coder", "Tester")[i % 3], line_start=i + 1, line_end=i + 1,
             content=f"step {i}: the agent writes some code and runs the tests. " * 10)
        for t in traces for i in range(6)
    )  # fmt: skip
    workers = []
    try:
        for k in range(n_workers):
            folder = scratch / f"worker-{n_workers}-{k}"
            worker = WorkerProcess(private_env(env, folder), log=folder / "worker.log")
            if k == 0:
                worker.purge()
            worker.start(concurrency=16, name=f"bench{k}")
            workers.append(worker)
        t0 = time.perf_counter()
        run = judge_run_create(
            project=project, by=None, provider="openai", base_url=llm_url, model="bench", concurrency=32, timeout=30
        )
        while JudgeRun.objects.get(pk=run.pk).is_active:
            time.sleep(0.1)
        elapsed = time.perf_counter() - t0
    finally:
        for worker in workers:
            worker.stop()
    run.refresh_from_db()
    labelled = Annotation.objects.filter(rater=run.rater, trace__project=project).count()
    errors = sorted(set(JudgeItem.objects.filter(run=run).exclude(error="").values_list("error", flat=True)))
    return (
        f"{run.n_done / elapsed:6.1f} traces/s  ({run.n_done} done, {run.n_failed} failed, {labelled} labels, "
        f"{elapsed:.1f} s){' errors: ' + '; '.join(e[:150] for e in errors[:3]) if errors else ''}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--traces", type=int, default=160)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--redis-db", type=int, default=12)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    s3 = S3Server(log=Path(tempfile.gettempdir()) / "mast_bench_cluster_s3.log").start()
    scratch = Path(tempfile.mkdtemp(prefix="mast-bench-cluster-"))
    env = bench_env(
        BENCH_DB,
        CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
        STORAGE_URL=s3.storage_url(s3.bucket("bench-cluster")),
        LOG_LEVEL="WARNING",
    )
    try:
        create_bench_db(env)
        infos = seed(env, 2 * args.clients)  # a fresh annotation per client in each of the two runs
        print(f"saves, {args.clients} clients back to back for {args.seconds:g} s:")
        for n in (1, 2):
            mine = infos[(n - 1) * args.clients : n * args.clients]
            print(f"  {n} web process{'es' if n > 1 else ''}: {saves(env, mine, n, args.seconds, scratch)}")

        django_setup(env)
        from tests.llm_server import LLMServer, Reply, codes_of, good_answer
        from traces.models import Project

        version = Project.objects.get(slug="bench").taxonomy_version
        llm = LLMServer(default=lambda b: Reply(good_answer(codes_of(b), codes_of(b)[:1]), delay=args.latency)).start()
        try:
            what = f"{args.traces} traces, answers in {args.latency:g} s, run concurrency 32, 16 threads a worker"
            print(f"judge, {what}:")
            for n in (1, 2):
                print(f"  {n} worker{'s' if n > 1 else ''}: {judge(env, n, args, scratch, llm.url, version)}")
        finally:
            llm.stop()
        print(f"objects left in the store: {len(s3.keys('bench-cluster'))}")
    finally:
        from django.db import connections

        connections.close_all()
        drop_bench_db(env)
        s3.stop()


if __name__ == "__main__":
    main()
