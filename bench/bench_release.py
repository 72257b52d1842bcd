"""Release build speed and memory: 10,000 traces x 14 modes with rater labels, no trace text.

Run: .venv/bin/python bench/bench_release.py [--traces 10000] [--raters 3] [--fresh]

1. Creates (or reuses) the PostgreSQL database mast_bench_release on DATABASE_URL's server,
   migrates it and fills it with COPY: one project, N traces (~2 KB of text each, seven
   frameworks), a closed round adjudicating every trace x 14 modes (N x 14 Adjudication rows),
   and `--raters` submitted annotations per trace (two people and one LLM judge by default:
   3N annotations, 42N mode labels, present ones with evidence and a rationale).
2. For each format (JSONL, Parquet, and all three at once) starts a fresh Python process that
   creates a release and builds it (release_create + release_build, as the Celery task does),
   and reports wall time of the build and the process's peak RSS (ru_maxrss).

Needs a PostgreSQL server (DATABASE_URL, default postgres://root@127.0.0.1:5432/...).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdb import bench_env, create_bench_db, django_setup  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_release"
FRAMEWORKS = ["ChatDev", "MetaGPT", "AG2", "HyperAgent", "AppWorld", "Magentic-One", "OpenManus"]
LLMS = ["gpt-4o", "claude-3.7-sonnet", "qwen-2.5-72b"]
BENCHMARKS = ["ProgramDev", "GSM-Plus", "SWE-Bench-Lite", "GAIA"]


def bench_database(db_name: str = BENCH_DB, *, fresh: bool = False) -> dict[str, str]:
    """Create (kept unless `fresh`) and migrate `db_name` (benchdb), set Django up; its environment."""
    env = bench_env(db_name, MAST_VAR_DIR=str(REPO / "var" / "bench_release"))
    create_bench_db(env, reuse=not fresh)
    django_setup(env)
    return env


def copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    """COPY `rows` (tuples in `columns` order) into `table` on a psycopg cursor."""
    cols = ", ".join(f'"{c}"' for c in columns)
    with cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def fill(n_traces: int, n_raters: int, seed: int = 11) -> None:
    """Bulk-load the bench project with COPY (minutes with the ORM, seconds with COPY)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotations.models import Rater, Round
    from taxonomy.services import taxonomy_seed_mast
    from traces.models import Trace
    from traces.projects.services import membership_set, project_get_or_create

    version = taxonomy_seed_mast()
    User = get_user_model()
    manager, _ = User.objects.get_or_create(username="bench-manager")
    project, _ = project_get_or_create(slug="bench", name="Release bench", by=manager)
    project.taxonomy_version = version
    project.save(update_fields=["taxonomy_version"])
    membership_set(project=project, user=manager, role="manager")
    if Trace.objects.filter(project=project).count() == n_traces:
        print(f"reusing {n_traces} traces")
        return
    rng = random.Random(seed)
    modes = list(version.modes.order_by("order", "code").values_list("id", "code"))
    rates = {code: 0.05 + 0.3 * rng.random() for _, code in modes}
    raters = []
    for i in range(n_raters):
        if i == n_raters - 1 and n_raters > 1:
            raters.append(Rater.objects.get_or_create(name="bench-judge", defaults={"kind": "llm"})[0])
        else:
            user, _ = User.objects.get_or_create(username=f"bench-rater-{i}")
            membership_set(project=project, user=user, role="annotator")
            raters.append(Rater.objects.get_or_create(user=user, defaults={"kind": "human", "name": user.username})[0])
    now = timezone.now()
    t0 = time.perf_counter()
    with transaction.atomic():
        cur = connection.connection.cursor()
        text_block = "Agent: " + "lorem ipsum dolor sit amet " * 70

        def trace_rows():
            for i in range(n_traces):
                raw = f"{text_block}\n# trace {i}"
                yield (
                    project.pk,
                    FRAMEWORKS[i % 7],
                    LLMS[i % 3],
                    BENCHMARKS[i % 4],
                    "",
                    f"bench-{i}",
                    "",
                    "plaintext",
                    raw,
                    len(raw),
                    f"{i:064x}",
                    json.dumps({"mad_key": f"k{i}", "mad_index": i}),
                    "",
                    rng.randint(5, 90),
                    3,
                    rng.randint(1, 30),
                    len(raw),
                    2,
                    rng.randint(0, 8),
                    "[]",
                    now,
                )

        copy_rows(
            cur,
            "traces_trace",
            [
                "project_id",
                "mas_name",
                "llm_name",
                "benchmark",
                "task",
                "external_id",
                "title",
                "format",
                "raw_text",
                "size_bytes",
                "content_hash",
                "metadata",
                "outcome",
                "n_steps",
                "n_agents",
                "n_agent_switches",
                "n_chars",
                "n_lines",
                "n_repeated_steps",
                "agents",
                "imported_at",
            ],
            trace_rows(),
        )
        trace_ids = list(Trace.objects.filter(project=project).order_by("id").values_list("id", flat=True))
        rnd = Round.objects.create(
            project=project, name="Bench round", taxonomy_version=version, state="closed", closed_at=now
        )
        truth = {tid: {code for _, code in modes if rng.random() < rates[code]} for tid in trace_ids}
        copy_rows(
            cur,
            "annotations_roundtrace",
            ["round_id", "trace_id", "order"],
            ((rnd.pk, tid, i) for i, tid in enumerate(trace_ids)),
        )
        copy_rows(
            cur,
            "annotations_adjudication",
            ["round_id", "trace_id", "mode_id", "decision", "basis", "note", "at"],
            (
                (rnd.pk, tid, mid, "present" if code in truth[tid] else "absent", "adjudicated", "", now)
                for tid in trace_ids
                for mid, code in modes
            ),
        )
        copy_rows(
            cur,
            "annotations_annotation",
            [
                "trace_id",
                "rater_id",
                "taxonomy_version_id",
                "round_id",
                "state",
                "task_success",
                "notes",
                "revision",
                "source",
                "created_at",
                "updated_at",
                "submitted_at",
            ],
            (
                (tid, r.pk, version.pk, None, "submitted", "unknown", "", 1, "{}", now, now, now)
                for tid in trace_ids
                for r in raters
            ),
        )
        cur.execute(
            "SELECT a.id, a.trace_id FROM annotations_annotation a JOIN traces_trace t ON t.id = a.trace_id "
            "WHERE t.project_id = %s",
            [project.pk],
        )
        ann = cur.fetchall()

        def label_rows():
            for aid, tid in ann:
                for mid, code in modes:
                    present = (code in truth[tid]) != (rng.random() < 0.1)
                    yield (
                        aid,
                        mid,
                        "present" if present else "absent",
                        json.dumps([{"step": rng.randint(0, 20)}]) if present else "[]",
                        "The agent repeats the plan." if present else "",
                        None,
                    )

        copy_rows(
            cur,
            "annotations_modelabel",
            ["annotation_id", "mode_id", "decision", "evidence", "rationale", "confidence"],
            label_rows(),
        )
    print(
        f"loaded {n_traces} traces, {n_traces * len(modes)} adjudications, {len(ann)} annotations, "
        f"{len(ann) * len(modes)} labels in {time.perf_counter() - t0:.1f} s"
    )


def build_once(formats: list[str], *, trace_text: bool = False) -> dict:
    """Create + build one release of the bench project as the Celery task does (in a fresh process
    for the peak RSS to mean something), report time, traces, files and peak RSS."""
    from django.contrib.auth import get_user_model

    from annotations.releases.services import release_build, release_create
    from traces.models import Project

    project = Project.objects.get(slug="bench")
    manager = get_user_model().objects.get(username="bench-manager")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    release = release_create(
        project=project,
        by=manager,
        enqueue=False,
        title=f"bench run {time.time_ns()}",  # a distinct request: identical ones return the last release
        options={"formats": formats, "trace_text": trace_text, "raters": True, "judge": True, "evidence": True},
    )
    release = release_build(release_id=release.pk)
    elapsed = time.perf_counter() - t
    sizes = {f.name: f.size_bytes for f in release.files.all()}
    return {
        "formats": formats,
        "seconds": round(elapsed, 2),
        "traces": release.n_traces,
        "rss_before_mb": round(rss0, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "files_mb": {k: round(v / 1024**2, 2) for k, v in sizes.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10000)
    ap.add_argument("--raters", type=int, default=3)
    ap.add_argument("--fresh", action="store_true", help="drop and recreate the bench database")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", default=BENCH_DB, help=f"bench database name (default {BENCH_DB})")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        django_setup(dict(os.environ))
        print(json.dumps(build_once(args.child.split(","))))
        return
    env = bench_database(args.db, fresh=args.fresh)
    fill(args.traces, args.raters)
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")  # fresh COPYed tables have no statistics until autovacuum gets to them
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs; {args.repeat} runs each, a fresh process per run")
    print(f"{'formats':<22} {'min s':>6} {'median s':>9} {'peak RSS MB':>12} {'(at start)':>10}  files")
    for formats in (["jsonl"], ["parquet"], ["csv"], ["jsonl", "csv", "parquet"]):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--child", ",".join(formats)],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
            )
            if out.returncode:
                sys.exit(out.stderr)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        secs = sorted(r["seconds"] for r in runs)
        r = runs[-1]
        files = ", ".join(f"{k} {v} MB" for k, v in r["files_mb"].items() if not k.endswith((".md", ".json")))
        print(
            f"{'+'.join(formats):<22} {secs[0]:>6.2f} {secs[len(secs) // 2]:>9.2f} "
            f"{max(x['peak_rss_mb'] for x in runs):>12.1f} {r['rss_before_mb']:>10.1f}  {files}  ({r['traces']} traces)"
        )


if __name__ == "__main__":
    main()
