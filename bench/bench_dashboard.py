"""Analytics dashboard server time for 10,000 traces x 14 modes.

Run: .venv/bin/python bench/bench_dashboard.py [--traces 10000] [--repeat 7]

Uses the database of bench_release.py (mast_bench_release; filled with COPY if missing: 10,000
traces over seven frameworks, a closed round adjudicating every trace x 14 modes, three raters'
labels) and times, in this process, the whole request through Django's test client (middleware,
session, the SQL aggregation, numpy statistics, SVG rendering, template): agreed labels, one
rater's labels, a framework filter, a cohort comparison, and one chart's CSV.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_release  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10000)
    ap.add_argument("--db", default=bench_release.BENCH_DB, help="bench database name")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    bench_release.bench_database(args.db)
    bench_release.fill(args.traces, 3)

    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotations.models import Rater

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-manager"))
    judge = Rater.objects.get(name="bench-judge").pk
    cases = [
        ("agreed labels", ""),
        ("one rater (LLM judge)", f"?rater={judge}"),
        ("framework filter", "?mas_name=ChatDev"),
        ("cohort comparison", "?a=mas_name:ChatDev&b=mas_name:MetaGPT"),
        ("one chart as CSV", "?format=csv&chart=corr_modes"),
    ]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.repeat} requests per case")
    print("cold = cache cleared before each request (SQL aggregation + statistics + SVG); warm = cached charts")
    print(
        f"{'case':<24} {'cold min':>9} {'cold median':>12} {'warm median':>12} {'queries':>8} {'SQL ms':>7} "
        f"{'cold CPU':>8}  traces"
    )
    for name, query in cases:
        path = f"/p/bench/analytics/{query}"
        client.get(path, secure=True)  # warm the process (imports, templates), like a running server
        cold, warm, cpu = [], [], []
        for _ in range(args.repeat):
            cache.clear()
            with CaptureQueriesContext(connection) as ctx:
                t, c = time.perf_counter(), time.process_time()
                resp = client.get(path, secure=True)
                cold.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
                n_queries = len(connection.queries_log) - ctx.initial_queries
                sql_ms = sum(float(q["time"]) for q in list(connection.queries_log)[ctx.initial_queries :]) * 1000
            assert resp.status_code == 200, resp.status_code
            t = time.perf_counter()
            client.get(path, secure=True)
            warm.append((time.perf_counter() - t) * 1000)
        found = re.search(rb'data-testid="n-traces">(\d+)', resp.content)
        n = found.group(1).decode() if found else "-"
        print(
            f"{name:<24} {min(cold):>9.0f} {statistics.median(cold):>12.0f} {statistics.median(warm):>12.0f} "
            f"{n_queries:>8} {sql_ms:>7.0f} {statistics.median(cpu):>8.0f}  {n}"
        )


if __name__ == "__main__":
    main()
