"""A large project: 100,000 traces labelled on 14 modes by 4 raters. Trace list, dashboard, round report, release.

Run: .venv/bin/python bench/bench_large_project.py [--traces 100000] [--text-kb 2] [--reuse] [--runs 10]
     .venv/bin/python bench/bench_large_project.py --text-kb 100   # the issue's full size: ~10 GB of text

1. Builds (or with --reuse keeps) the PostgreSQL database mast_bench_large on DATABASE_URL's server
   with COPY: one project of --traces traces (seven frameworks, three LLMs, four benchmarks) of
   --text-kb KB of text each, a closed round holding every trace with 4 human raters' submitted
   annotations (4N annotations, 56N mode labels, present ones with evidence and a rationale) and
   an adjudication per trace x mode (14N rows). Every row count is the issue's; the text is scaled
   down by default (2 KB a trace, 200 MB) because the machine's disk and time are shared today:
   none of the pages measured here reads trace text, so its size moves only the COPY time and the
   release when it includes the text (not measured: releases here leave the text out).
2. Server time through Django's test client (middleware, session, SQL, template), --runs GETs
   each: the trace list (first page, a framework filter, largest first, a search, page 1,000),
   the analytics dashboard (cache cleared before every GET: the cold case; one agreed label
   flipped before every GET: the first request after a decision; then cached; and one rater's labels
   as the source, one of her labels changed before every GET), the round report page
   (after the report is computed and stored once, which is timed too).
3. A release of the whole project (JSONL and Parquet, raters' labels and evidence, no trace text)
   built in this process as the Celery task does, timed.
Prints the load average with every block: other engineers' jobs share the 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

from bench_release import BENCHMARKS, FRAMEWORKS, LLMS, build_once, copy_rows  # bench/ is on sys.path
from benchdb import bench_env, create_bench_db, django_setup

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_large"
N_RATERS = 4


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def fill(n_traces: int, text_kb: int, seed: int = 5) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotations.models import Rater, Round, RoundAnnotator
    from traces.models import Trace
    from traces.projects.services import membership_set, project_create

    User = get_user_model()
    manager = User.objects.create_user("bench-manager")
    project = project_create(name="Large project bench", slug="bench", by=manager)
    version = project.taxonomy_version
    modes = list(version.modes.order_by("order", "code").values_list("id", "code"))
    rng = random.Random(seed)
    rates = {code: 0.03 + 0.25 * rng.random() for _, code in modes}
    raters = []
    for i in range(N_RATERS):
        user = User.objects.create_user(f"bench-rater-{i}")
        membership_set(project=project, user=user, role="annotator")
        raters.append(Rater.objects.create(user=user, kind="human", name=user.username))
    now = timezone.now()
    filler = ("Programmer: the board keeps its size and the score prints after every move. " * 14)[:1024]
    text = (filler + "\n") * text_kb
    t0 = time.perf_counter()
    with transaction.atomic():
        cur = connection.connection.cursor()
        cols = "project_id mas_name llm_name benchmark task external_id title format raw_text size_bytes "
        cols += "content_hash metadata outcome n_steps n_agents n_agent_switches n_chars n_lines n_repeated_steps "
        cols += "agents imported_at"
        copy_rows(
            cur,
            "traces_trace",
            cols.split(),
            (
                (
                    project.pk,
                    FRAMEWORKS[i % 7],
                    LLMS[i % 3],
                    BENCHMARKS[i % 4],
                    f"Task {i}: build a snake game with a fixed board",
                    f"large-{i}",
                    f"{FRAMEWORKS[i % 7]} run {i}",
                    "plaintext",
                    text + f"# trace {i}",
                    len(text) + 12,
                    f"{i:064x}",
                    "{}",
                    ("success", "failure", "")[i % 3],
                    rng.randint(5, 400),
                    3,
                    rng.randint(1, 60),
                    len(text) + 12,
                    text_kb + 1,
                    rng.randint(0, 8),
                    "[]",
                    now,
                )
                for i in range(n_traces)
            ),
        )
        print(f"  traces copied in {time.perf_counter() - t0:.0f} s")
        trace_ids = list(Trace.objects.filter(project=project).order_by("id").values_list("id", flat=True))
        rnd = Round.objects.create(
            project=project, name="Large round", taxonomy_version=version, state="closed", closed_at=now
        )
        RoundAnnotator.objects.bulk_create(RoundAnnotator(round=rnd, user=r.user) for r in raters)
        copy_rows(
            cur,
            "annotations_roundtrace",
            ["round_id", "trace_id", "order"],
            ((rnd.pk, tid, i) for i, tid in enumerate(trace_ids)),
        )
        truth = {tid: frozenset(code for _, code in modes if rng.random() < rates[code]) for tid in trace_ids}
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
        cols = "trace_id rater_id taxonomy_version_id round_id state task_success notes revision source "
        cols += "created_at updated_at submitted_at"
        copy_rows(
            cur,
            "annotations_annotation",
            cols.split(),
            (
                (tid, r.pk, version.pk, rnd.pk, "submitted", "unknown", "", 1, "{}", now, now, now)
                for tid in trace_ids
                for r in raters
            ),
        )
        cur.execute("SELECT id, trace_id FROM annotations_annotation WHERE round_id = %s", [rnd.pk])
        annotations = cur.fetchall()
        print(f"  round, adjudications and annotations copied at {time.perf_counter() - t0:.0f} s")

        def label_rows():
            for aid, tid in annotations:
                for mid, code in modes:
                    present = (code in truth[tid]) != (rng.random() < 0.08)
                    yield (
                        aid,
                        mid,
                        "present" if present else "absent",
                        json.dumps([{"step": rng.randint(0, 40)}]) if present else "[]",
                        "The reviewer approves without running the code." if present else "",
                        None,
                    )

        copy_rows(
            cur,
            "annotations_modelabel",
            ["annotation_id", "mode_id", "decision", "evidence", "rationale", "confidence"],
            label_rows(),
        )
    with connection.cursor() as c:
        c.execute("VACUUM ANALYZE")  # as autovacuum would soon after a bulk load: index-only scans need it
    print(
        f"built {n_traces:,} traces ({n_traces * (len(text) + 12) / 1024**3:.2f} GB of text), "
        f"{len(annotations):,} annotations, {len(annotations) * len(modes):,} mode labels, "
        f"{n_traces * len(modes):,} adjudications with COPY in {time.perf_counter() - t0:.0f} s ({load()})"
    )


def add_judge_and_dates(seed: int = 7) -> int:
    """For the monitoring and corrected-experiment figures (issue 31), once: an LLM rater
    "bench-judge" labelling every trace (outside the round), and the traces' import dates spread
    over the last 52 weeks (the fill imports them all at once). Returns the judge's rater id."""
    from django.db import connection, transaction
    from django.utils import timezone

    from annotations.models import Rater
    from traces.models import Project

    judge = Rater.objects.filter(name="bench-judge").first()
    if judge:
        return judge.pk
    project = Project.objects.get(slug="bench")
    version = project.taxonomy_version
    modes = list(version.modes.order_by("order", "code").values_list("id", "code"))
    rng = random.Random(seed)
    rates = {code: 0.05 + 0.25 * rng.random() for _, code in modes}
    now = timezone.now()
    t0 = time.perf_counter()
    with transaction.atomic():
        judge = Rater.objects.create(kind="llm", name="bench-judge")
        cur = connection.connection.cursor()
        cur.execute(
            "UPDATE traces_trace SET imported_at = now() - make_interval(secs => (id %% 31449600)) "
            "WHERE project_id = %s",
            [project.pk],
        )
        cur.execute("SELECT id FROM traces_trace WHERE project_id = %s", [project.pk])
        trace_ids = [r[0] for r in cur.fetchall()]
        cols = "trace_id rater_id taxonomy_version_id state task_success notes revision source "
        cols += "created_at updated_at submitted_at"
        copy_rows(cur, "annotations_annotation", cols.split(),
                  ((tid, judge.pk, version.pk, "submitted", "unknown", "", 1, "{}", now, now, now)
                   for tid in trace_ids))  # fmt: skip
        cur.execute("SELECT id FROM annotations_annotation WHERE rater_id = %s", [judge.pk])
        annotations = [r[0] for r in cur.fetchall()]
        copy_rows(cur, "annotations_modelabel", ["annotation_id", "mode_id", "decision", "evidence", "rationale"],
                  ((aid, mid, "present" if rng.random() < rates[code] else "absent", "[]", "")
                   for aid in annotations for mid, code in modes))  # fmt: skip
    with connection.cursor() as c:
        c.execute("VACUUM ANALYZE")
    print(f"  judge labels on {len(annotations):,} traces and import dates over 52 weeks in "
          f"{time.perf_counter() - t0:.0f} s ({load()})")  # fmt: skip
    return judge.pk


def flip_one_label(rnd) -> None:
    """One agreed label changes, as a manager's decision does: one adjudication of the closed round
    flips (present <-> absent). Its triggers move the project's labels stamp and recompute that
    trace's ``AgreedMask`` row, so the dashboard's labels are stale and its traces' columns are not."""
    from annotations.models import Adjudication

    adj = Adjudication.objects.filter(round=rnd).order_by("trace_id", "mode_id").first()
    flipped = "absent" if adj.decision == "present" else "present"
    Adjudication.objects.filter(pk=adj.pk).update(decision=flipped)


def save_one_label(rater) -> None:
    """What a rater's save writes, in SQL (the round is closed, so the service would refuse): one of
    her mode labels flips, her annotation's revision and update time move."""
    from django.db.models import F
    from django.utils import timezone

    from annotations.models import Annotation, ModeLabel

    first = Annotation.objects.filter(rater=rater).order_by("id").values_list("id", flat=True).first()
    label = ModeLabel.objects.filter(annotation_id=first).order_by("mode_id").first()
    ModeLabel.objects.filter(pk=label.pk).update(decision="absent" if label.decision == "present" else "present")
    Annotation.objects.filter(pk=label.annotation_id).update(revision=F("revision") + 1, updated_at=timezone.now())


def time_get(client, path: str, runs: int, before=None) -> tuple[float, float, int, float]:
    """p50 and p95 wall ms, queries, median CPU ms of this (the web) process; PostgreSQL's is apart."""
    from django.db import connections

    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    if before:
        before()
    with connections["default"].execute_wrapper(count):
        r = client.get(path)
    assert r.status_code == 200, (path, r.status_code)
    wall, cpu = [], []
    for _ in range(runs):
        if before:
            before()
        t, c = time.perf_counter(), time.process_time()
        r = client.get(path)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        assert r.status_code == 200
    return statistics.median(wall), pct(wall, 0.95), len(queries), statistics.median(cpu)


def time_rules(judge: int, runs: int) -> None:
    """One evaluation of an alert rule (what a worker does every MAST_ALERT_EVERY_SECONDS)."""
    from django.contrib.auth import get_user_model

    from annotations.models import AlertRule
    from annotations.monitoring.alerts import rule_evaluate
    from traces.models import Project

    project = Project.objects.get(slug="bench")
    manager = get_user_model().objects.get(username="bench-manager")
    rules = [
        ("alert rule, level, category 3, 28 days", {"kind": "level", "target": "3", "level": 0.99}),
        ("alert rule, baseline, every mode", {"kind": "baseline", "target": "*", "baseline_days": 90}),
        ("alert rule, level, corrected judge", {"kind": "level", "target": "1.3", "level": 0.99,
                                                "source": f"corrected:{judge}"}),
    ]  # fmt: skip
    for name, fields in rules:
        rule, _ = AlertRule.objects.update_or_create(
            project=project, name=name, defaults={"window_days": 28, "created_by": manager, **fields}
        )
        wall = []
        for _ in range(max(3, runs // 2)):
            AlertRule.objects.filter(pk=rule.pk).update(firing=[])
            t = time.perf_counter()
            rule_evaluate(rule_id=rule.pk)
            wall.append((time.perf_counter() - t) * 1000)
        print(f"{name:44} {statistics.median(wall):8.0f} {pct(wall, 0.95):8.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--text-kb", type=int, default=2, help="KB of text per trace (100 = the issue's 10 GB)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--reuse", action="store_true", help="keep the database of an earlier run")
    ap.add_argument("--db", default=BENCH_DB, help=f"bench database name (default {BENCH_DB})")
    ap.add_argument("--no-release", action="store_true")
    ap.add_argument(
        "--keep-report", action="store_true", help="reuse the stored round report when fresh (else it is recomputed)"
    )
    ap.add_argument("--list-only", action="store_true", help="only the trace list (the rest takes minutes at 100,000)")
    ap.add_argument("--experiment-only", action="store_true", help="only the experiment comparisons (issue 31)")
    args = ap.parse_args()
    env = bench_env(args.db, MAST_VAR_DIR=str(REPO / "var" / "bench_large"))
    fresh = create_bench_db(env, reuse=args.reuse)
    django_setup(env)
    if fresh:
        fill(args.traces, args.text_kb)

    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.test import Client

    from annotations.models import Annotation, ModeLabel, Rater, Round
    from annotations.rounds.services import agreement_report_get
    from traces.models import Trace

    n = Trace.objects.filter(project__slug="bench").count()
    rnd = Round.objects.get(project__slug="bench", name="Large round")
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-manager"))

    print(f"\nserver time, {args.runs} GETs each, {n:,} traces ({load()})")
    print(f"{'page':44} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8} {'web CPU ms':>10}")
    cases = [
        ("trace list, first page", "/p/bench/traces/"),
        ("trace list, framework filter", "/p/bench/traces/?framework=AG2"),
        ("trace list, largest first", "/p/bench/traces/?sort=size"),
        ("trace list, search 'run 99999'", "/p/bench/traces/?q=run+99999"),
        ("trace list, page 1,000", "/p/bench/traces/?page=1000"),
        ("trace list API, first page", "/api/projects/bench/traces/"),
    ]
    if not args.experiment_only:
        for name, path in cases:
            p50, p95, q, cpu = time_get(client, path, args.runs)
            print(f"{name:44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    if args.list_only:
        return
    api = "/api/projects/bench/experiments/compare/"
    other_llm = Trace.objects.exclude(llm_name="gpt-4o").values_list("llm_name", flat=True).first()
    experiments = [
        ("experiment API, two frameworks", f"{api}?a=mas_name:AG2&b=mas_name:ChatDev"),
        ("experiment API, two LLMs", f"{api}?a=llm_name:gpt-4o&b=llm_name:{other_llm}"),
        ("experiment page, two frameworks", "/p/bench/analytics/experiment/?a=mas_name:AG2&b=mas_name:ChatDev"),
        ("experiment API, imported before/after", f"{api}?a=imported:..2000-01-01&b=imported:2000-01-01.."),
    ]
    judge = add_judge_and_dates()
    experiments += [
        ("experiment API, judge corrected", f"{api}?a=mas_name:AG2&b=mas_name:ChatDev&rater=corrected:{judge}"),
        ("monitoring API, per week, agreed", "/api/projects/bench/monitoring/?bucket=week"),
        ("monitoring API, per day, one framework", "/api/projects/bench/monitoring/?bucket=day&cohort=mas_name:AG2"),
        ("monitoring page, per week, corrected judge", f"/p/bench/analytics/monitoring/?rater=corrected:{judge}"),
    ]
    for name, path in experiments:
        p50, p95, q, cpu = time_get(client, path, args.runs)
        print(f"{name:44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    time_rules(judge, args.runs)
    if args.experiment_only:
        return
    p50, p95, q, cpu = time_get(client, "/p/bench/analytics/", max(3, args.runs // 2), before=cache.clear)
    print(f"{'analytics dashboard, cache cleared':44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    p50, p95, q, cpu = time_get(client, "/p/bench/analytics/", args.runs, before=lambda: flip_one_label(rnd))
    print(f"{'analytics dashboard, after a label change':44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    p50, p95, q, cpu = time_get(client, "/p/bench/analytics/", args.runs)
    print(f"{'analytics dashboard, cached':44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    t, c = time.perf_counter(), time.process_time()
    agreement_report_get(round=rnd, force=not args.keep_report)
    print(
        f"{'round report computed and stored once':44} {(time.perf_counter() - t) * 1000:8.0f} ms, "
        f"CPU {(time.process_time() - c) * 1000:.0f} ms ({load()})"
    )
    p50, p95, q, cpu = time_get(client, f"/p/bench/rounds/{rnd.pk}/report/", args.runs)
    print(f"{'round report page (stored report)':44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    rater = Rater.objects.get(name="bench-rater-0")
    saved = Annotation.objects.filter(rater=rater).order_by("id").values("id", "revision", "updated_at").first()
    label = ModeLabel.objects.filter(annotation_id=saved["id"]).order_by("mode_id").values("id", "decision").first()
    p50, p95, q, cpu = time_get(
        client, f"/p/bench/analytics/?rater={rater.pk}", max(3, args.runs // 2), before=lambda: save_one_label(rater)
    )
    print(f"{'dashboard of a rater, after she saves':44} {p50:8.0f} {p95:8.0f} {q:8d} {cpu:10.0f}")
    # her saves undone, so that the stored round report stays fresh for the next run with --keep-report
    ModeLabel.objects.filter(pk=label["id"]).update(decision=label["decision"])
    Annotation.objects.filter(pk=saved["id"]).update(revision=saved["revision"], updated_at=saved["updated_at"])

    if not args.no_release:
        for formats in (["jsonl"], ["parquet"]):
            r = build_once(formats)
            print(
                f"release of {r['traces']:,} traces, {formats[0]}: {r['seconds']:.1f} s, "
                f"{sum(r['files_mb'].values()):.0f} MB of files, peak RSS {r['peak_rss_mb']:.0f} MB ({load()})"
            )


if __name__ == "__main__":
    sys.exit(main())
