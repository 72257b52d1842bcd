"""Trace list speed: the trace list page and API over 10,000 traces in PostgreSQL.

Run: .venv/bin/python bench/bench_trace_list.py [--traces 10000] [--raw-kb 100] [--runs 20] [--reuse]

1. Creates a fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_trace_list), migrates
   it, and stores --traces traces with realistic columns: 7 frameworks, 6 LLMs, 12 benchmarks,
   log-normal sizes and step counts, tasks of 200-3,000 characters, ~100 KB of raw text each (stored
   as PostgreSQL stores it: TOASTed), 20% with a submitted annotation, 10% with a draft only.
   --reuse keeps an existing bench database instead of rebuilding it.
2. Times GET /p/bench/traces/ (and the API) through Django's test client as a logged-in viewer,
   for the default page and for each filter, search and sort, and prints p50/p95 in ms and the
   number of SQL queries per request.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time
from pathlib import Path

from benchdb import bench_env, create_bench_db, django_setup  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_trace_list"
FRAMEWORKS = ["ChatDev", "MetaGPT", "AG2", "HyperAgent", "AppWorld", "Magentic-One", "OpenManus"]
LLMS = ["gpt-4o", "claude-3.7-sonnet", "qwen2.5-coder-32b", "codellama-34b", "o3-mini", "gpt-4o-mini"]
BENCHMARKS = [
    "ProgramDev",
    "HumanEval",
    "MMLU",
    "GSM-Plus",
    "SWE-Bench Lite",
    "AppWorld",
    "GAIA",
    "OlympiadBench",
    "MATH",
    "AssistantBench",
    "Test-Dev",
    "HotpotQA",
]
WORDS = " ".join(
    [
        "build a command line tool that reads a csv file and prints the total of every column then",
        "write tests for edge cases such as empty files unicode headers and negative numbers the agent",
        "should use python and keep the code readable fix the failing django migration in the repository",
    ]
).split(" ")


def setup_db(reuse: bool) -> bool:
    env = bench_env(BENCH_DB)
    fresh = create_bench_db(env, reuse=reuse)
    django_setup(env)
    return fresh


def lognormal_int(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, rng.lognormvariate(0, sigma) * median)))


def build(n: int, raw_kb: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from annotations.models import Annotation, Rater
    from traces.models import Membership, Trace
    from traces.projects.services import project_get_or_create

    rng = random.Random(7)
    User = get_user_model()
    viewer, _ = User.objects.get_or_create(username="bench-viewer")
    project, _ = project_get_or_create(slug="bench", name="Trace list bench")
    Membership.objects.update_or_create(project=project, user=viewer, defaults={"role": "viewer"})
    if project.traces.count() >= n:
        print(f"reusing {project.traces.count()} traces")
        return
    project.traces.all().delete()
    block = (" ".join(rng.choice(WORDS) for _ in range(200)) + "\n") * 3
    t0 = time.perf_counter()
    batch: list[Trace] = []
    for i in range(n):
        fw = FRAMEWORKS[i % len(FRAMEWORKS)]
        size = lognormal_int(rng, raw_kb * 1024, 0.9, 2_000, 2_000_000)
        raw = f"{fw} trace {i}\n" + block * max(1, raw_kb * 1024 // len(block))
        n_steps = lognormal_int(rng, 60, 1.0, 1, 5000)
        task = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 500)))
        batch.append(
            Trace(
                project=project,
                mas_name=fw,
                llm_name=rng.choice(LLMS),
                benchmark=rng.choice(BENCHMARKS),
                task=task,
                external_id=f"{fw.lower()}-{i:05d}-{rng.getrandbits(32):08x}",
                title=f"{fw} run {i}: {' '.join(rng.choice(WORDS) for _ in range(5))}",
                format=fw.lower(),
                raw_text=raw,
                size_bytes=size,
                content_hash=f"{i:064x}",
                outcome=rng.choice(["success", "failure", "", ""]),
                n_steps=n_steps,
                n_agents=rng.randint(1, 8),
                n_agent_switches=max(0, n_steps - rng.randint(0, n_steps)),
                n_chars=size,
                n_lines=size // 50,
                agents=["Planner", "Coder"],
            )
        )
        if len(batch) == 250:
            with transaction.atomic():
                Trace.objects.bulk_create(batch)
            batch = []
            print(f"\r  {i + 1} traces", end="", flush=True)
    if batch:
        Trace.objects.bulk_create(batch)
    print(f"\rstored {n} traces in {time.perf_counter() - t0:.1f} s")
    # "labelled" means labelled by a person, so the bench's labels come from a human rater.
    labeller, _ = User.objects.get_or_create(username="bench-annotator")
    rater, _ = Rater.objects.get_or_create(name="bench-annotator", defaults={"kind": "human", "user": labeller})
    ids = list(project.traces.values_list("id", flat=True))
    labelled = rng.sample(ids, len(ids) // 5)
    drafts = rng.sample(sorted(set(ids) - set(labelled)), len(ids) // 10)
    Annotation.objects.bulk_create(
        [
            Annotation(trace_id=t, rater=rater, taxonomy_version=project.taxonomy_version, state="submitted")
            for t in labelled
        ]
        + [
            Annotation(trace_id=t, rater=rater, taxonomy_version=project.taxonomy_version, state="draft")
            for t in drafts
        ]
    )
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def time_requests(runs: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-viewer"))
    cases = [
        ("page: newest", "/p/bench/traces/"),
        ("page: framework=AG2", "/p/bench/traces/?framework=AG2"),
        ("page: llm + benchmark", "/p/bench/traces/?llm=gpt-4o&benchmark=MMLU"),
        ("page: outcome=failure", "/p/bench/traces/?outcome=failure"),
        ("page: labelled=yes", "/p/bench/traces/?labelled=yes"),
        ("page: labelled=no", "/p/bench/traces/?labelled=no"),
        ("page: search id", "/p/bench/traces/?q=ag2-01234"),
        ("page: search task word", "/p/bench/traces/?q=migration"),
        ("page: search no hit", "/p/bench/traces/?q=zebra-unicorn"),
        ("page: sort size", "/p/bench/traces/?sort=size"),
        ("page: sort steps p.100", "/p/bench/traces/?sort=steps&page=100"),
        ("page: sort agents", "/p/bench/traces/?sort=agents"),
        ("page: sort framework", "/p/bench/traces/?sort=framework"),
        ("page: all filters", "/p/bench/traces/?framework=ChatDev&outcome=success&labelled=no&sort=size"),
        ("api: newest", "/api/projects/bench/traces/"),
        ("api: search + sort", "/api/projects/bench/traces/?q=csv&sort=steps"),
    ]
    print(f"load average before timing: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work inflates wall)")
    print(f"{'case':32} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu p50':>8} {'queries':>8}  rows")
    worst = 0.0
    for name, url in cases:
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        times, cpu = [], []
        for _ in range(runs):
            reset_queries()
            t, c = time.perf_counter(), time.process_time()
            r = client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        with CaptureQueriesContext(connection) as ctx:
            r = client.get(url)
        times.sort()
        p50 = statistics.median(times)
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        worst = max(worst, p95)
        if url.startswith("/api/"):
            rows = r.json()["count"]
        else:
            m = re.search(r"tl-summary[^>]*>\s*([\d,]+\+?) trace", r.content.decode())
            rows = m.group(1) if m else "?"
        cpu50 = statistics.median(cpu)
        print(f"{name:32} {p50:8.1f} {p95:8.1f} {times[-1]:8.1f} {cpu50:8.1f} {len(ctx.captured_queries):8d}  {rows}")
    print(f"worst p95: {worst:.1f} ms (target < 100 ms); cpu = this process's CPU time (Python side only)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--raw-kb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--reuse", action="store_true", help="reuse the bench database when it exists")
    args = ap.parse_args()
    setup_db(args.reuse)
    build(args.traces, args.raw_kb)
    time_requests(args.runs)


if __name__ == "__main__":
    main()
