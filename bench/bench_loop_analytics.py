"""Analytics dashboard server time when the agreed labels are spread over three taxonomy versions.

Run: .venv/bin/python bench/bench_loop_analytics.py [--traces 10000] [--repeat 5]

Its own database (mast_bench_loop), filled like bench_release.py (10,000 traces, a closed round
adjudicating every trace x 14 modes on MAST v1), then: v2 drafted from v1 with 1.5 edited, v3
drafted from v2 with 2.1 and 2.2 merged; two more closed rounds on v2 and v3 take over a third of
the traces each (their adjudications moved onto the new versions' modes, in SQL), and v3 becomes
the working version. So the dashboard maps two thirds of its labels, through one and two steps.
Times the whole request in-process (Django test client, cache cleared before each: the cold path).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_release  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LOOP_DB = "mast_bench_loop"


def spread_over_versions() -> None:
    from django.db import connection
    from django.utils import timezone

    from annotations.models import Round
    from taxonomy.models import TaxonomyVersion
    from taxonomy.services import mode_edit, mode_merge, version_draft_from, version_publish
    from traces.models import Project

    project = Project.objects.get(slug="bench")
    v1 = project.taxonomy_version
    if TaxonomyVersion.objects.filter(taxonomy=v1.taxonomy, number=3).exists():
        print("reusing the three versions")
        return
    v2 = version_draft_from(source=v1)
    mode_edit(mode=v2.modes.get(code="1.5"), definition="Revised: stops before the end condition is met.")
    version_publish(version=v2)
    v3 = version_draft_from(source=v2)
    mode_merge(
        modes=[v3.modes.get(code="2.1"), v3.modes.get(code="2.2")],
        code="2.1",
        name="Reset or no ask",
        definition="Merged.",
    )
    version_publish(version=v3)
    first = Round.objects.filter(project=project, state="closed").order_by("id").first()
    for k, version in ((1, v2), (2, v3)):
        rnd = Round.objects.create(
            project=project,
            name=f"bench on v{version.number}",
            taxonomy_version=version,
            state="closed",
            opened_at=timezone.now(),
            review_at=timezone.now(),
            closed_at=timezone.now(),
        )
        with connection.cursor() as cur:
            # a third of the traces: their consensus moves to this round, onto the same-coded mode
            cur.execute(
                """UPDATE annotations_adjudication a SET round_id = %s, mode_id = m2.id
                   FROM taxonomy_failuremode m1, taxonomy_failuremode m2
                   WHERE a.round_id = %s AND a.mode_id = m1.id AND m2.version_id = %s AND m2.code = m1.code
                     AND a.trace_id %% 3 = %s""",
                [rnd.pk, first.pk, version.pk, k],
            )
            cur.execute(
                "DELETE FROM annotations_adjudication WHERE round_id = %s AND trace_id %% 3 = %s", [first.pk, k]
            )
    Project.objects.filter(pk=project.pk).update(taxonomy_version=v3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10000)
    ap.add_argument("--db", default=LOOP_DB, help="bench database name")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    bench_release.bench_database(args.db)
    bench_release.fill(args.traces, 3)
    spread_over_versions()

    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-manager"))
    path = "/p/bench/analytics/"
    client.get(path, secure=True)
    cold, cpu, warm = [], [], []
    for _ in range(args.repeat):
        cache.clear()
        t, c = time.perf_counter(), time.process_time()
        resp = client.get(path, secure=True)
        cold.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        t = time.perf_counter()
        client.get(path, secure=True)
        warm.append((time.perf_counter() - t) * 1000)
        assert resp.status_code == 200
    import re

    from annotations.analytics.selectors import label_matrix
    from traces.models import Project

    project = Project.objects.select_related("taxonomy_version__taxonomy").get(slug="bench")
    M = label_matrix(user=get_user_model().objects.get(username="bench-manager"), project=project)
    shown = re.search(rb'data-testid="n-traces">(\d+)', resp.content)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.repeat} cold requests")
    print(f"traces on the dashboard: {shown.group(1).decode() if shown else '-'}; target {M.target_label}")
    for row in M.mapping:
        print(
            f"  {row['version']}: {row['labels']} labels, {row['mapped']} mapped, "
            f"{row['unknown']} unknown, {row['dropped']} dropped"
        )
    print(
        f"cold min {min(cold):.0f} ms, median {statistics.median(cold):.0f} ms (web CPU median "
        f"{statistics.median(cpu):.0f} ms); cached median {statistics.median(warm):.0f} ms; load {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
