"""Corpus search at a million traces (issue 32): build the project, then print every figure.

Run: .venv/bin/python bench/bench_corpus.py [--traces 1000000] [--steps-per-trace 20] [--reuse] [--runs 7]

1. Builds (or with --reuse keeps) the database mast_bench_corpus on DATABASE_URL's server:
   * a small project "real" with the real traces (``traces/demo_data`` and, where it is beside the
     repo, ``../shared/mast/traces``) imported by the product's importer: their parsed steps are the
     pool the big project is made of;
   * the project "bench": --traces traces (seven frameworks, three LLMs, four benchmarks, import
     dates over a year) of mean-14 to mean+14 steps (mean --steps-per-trace), each step a real step of the pool
     (agent, kind and text; cut to at most 600 characters) with the trace's number in it, so no
     two steps are equal; the trace's raw text is its steps joined. Loaded with COPY, the step indexes
     dropped during the load and built after it, the word index beside the vocabulary (timed: the disk
     they take is printed); a build stopped halfway resumes with --reuse;
   * a closed round of 20,000 traces with two raters and agreed labels, a judge on 100,000 traces,
     and a draft round (the round page); then a closed round "Every trace" with agreed labels on
     every other trace (a release holds the traces with agreed labels: the release of every trace).
2. Server time through Django's test client, --runs GETs each: the corpus search API for a word, a
   phrase, a prefix and regular expressions (each with how many steps it matches), with filters,
   the page; the trace list, the dashboard and the round page.
3. An import of a MAST-Data-shaped file (``bench_import``'s) into the bench database with the
   index present: MB/s. 4. A release of every trace, streamed: time and peak RSS.
Prints the load average with every block: the 2 cores are shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import resource
import statistics
import subprocess
import sys
import time
from importlib import import_module
from pathlib import Path

from bench_large_project import load, pct  # bench/ is on sys.path
from bench_release import BENCHMARKS, FRAMEWORKS, LLMS, copy_rows
from benchdb import bench_env, create_bench_db, django_setup

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_corpus"
MAX_STEP_CHARS = 600
LABELLED = 20_000
JUDGED = 100_000


def real_pool(manager) -> list[tuple[str, str, str]]:
    """(agent, kind, text) of every step of the real traces, imported by the product's importer."""
    from traces.importing.service import traces_import
    from traces.models import Step
    from traces.projects.services import project_create

    project = project_create(name="Real MAST traces", slug="real", by=manager)
    folders = [REPO / "traces" / "demo_data"]
    shared = REPO.parent / "shared" / "mast" / "traces"
    if shared.is_dir():
        folders += sorted(p for p in shared.iterdir() if p.is_dir())
    for folder in folders:
        try:
            traces_import(project=project, paths_or_files=[folder])
        except Exception as exc:  # a folder the importer refuses is said, and left out of the pool
            print(f"  {folder.name}: not imported ({str(exc)[:120]})")
    pool = [
        (agent[:200], kind, text[:MAX_STEP_CHARS])
        for agent, kind, text in Step.objects.filter(trace__project=project).values_list("agent", "kind", "content")
        if text.strip()
    ]
    print(f"  step pool: {len(pool):,} real steps from {project.traces.count()} traces")
    return pool


# searchable: the bench's corpus is indexed already (traces/search/indexing.py)
STEP_COLS = ["trace_id", "index", "agent", "kind", "content", "line_start", "line_end", "details", "model", "recipient",
             "searchable"]  # fmt: skip
TRACE_COLS = [
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
]


def load_traces(project, pool, first: int, n: int, mean_steps: int, rng, t0: float, chunk: int = 50_000) -> int:
    """Traces number ``first`` .. ``first + n - 1`` with their steps, by COPY; returns the steps."""
    from django.db import connection, transaction
    from django.utils import timezone

    now = timezone.now()
    total = 0
    for start in range(first, first + n, chunk):
        trace_rows, step_rows = [], []
        for i in range(start, min(first + n, start + chunk)):
            k = mean_steps + rng.randint(-14, 14)  # symmetric: the mean is mean_steps
            picks = [pool[rng.randrange(len(pool))] for _ in range(k)]
            texts = [f"{text} [run {i}.{j}]" for j, (_a, _k, text) in enumerate(picks)]
            raw = "\n".join(texts)
            agents = sorted({a for a, _k, _t in picks if a})
            trace_rows.append((
                project.pk, FRAMEWORKS[i % 7], LLMS[i % 3], BENCHMARKS[i % 4], f"Task {i}: the run's request",
                f"corpus-{i}", f"{FRAMEWORKS[i % 7]} run {i}", "plaintext", raw, len(raw.encode()),
                f"{i:064x}", "{}", ("success", "failure", "")[i % 3], k, len(agents), 0, len(raw),
                raw.count("\n") + 1, 0, "[]", now - dt.timedelta(minutes=max(0, 1_000_000 - i) * 30),
            ))  # fmt: skip
            step_rows.append((i, picks, texts))
        with transaction.atomic():
            cur = connection.connection.cursor()
            copy_rows(cur, "traces_trace", TRACE_COLS, trace_rows)
            cur.execute(
                "SELECT external_id, id FROM traces_trace WHERE project_id = %s AND external_id = ANY(%s)",
                [project.pk, [f"corpus-{i}" for i, _p, _t in step_rows]],
            )
            ids = dict(cur.fetchall())

            def rows(step_rows=step_rows, ids=ids):
                for i, picks, texts in step_rows:
                    tid = ids[f"corpus-{i}"]
                    line = 1
                    for j, ((agent, kind, _x), text) in enumerate(zip(picks, texts, strict=True)):
                        n_lines = text.count("\n")
                        yield (tid, j, agent, kind, text, line, line + n_lines, "{}", "", "", True)
                        line += n_lines + 1

            copy_rows(cur, "traces_step", STEP_COLS, rows())
        total += sum(len(p) for _i, p, _t in step_rows)
        if ((start - first) // chunk) % 4 == 0:
            print(f"  {start + len(trace_rows) - first:,} traces, {total:,} steps at {time.perf_counter() - t0:.0f} s")
    return total


def top_up(min_steps: int, mean_steps: int) -> None:
    """More traces (COPY, the step index present) until the project has ``min_steps`` steps: a
    database built before the mean was raised to 21 had 19.5 M."""
    from django.db import connection

    from traces.models import Project, Step, Trace

    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM traces_step s JOIN traces_trace t ON t.id = s.trace_id "
                  "JOIN traces_project p ON p.id = t.project_id WHERE p.slug = 'bench'")  # fmt: skip
        have = c.fetchone()[0]
    if have >= min_steps:
        return
    project = Project.objects.get(slug="bench")
    n_traces = Trace.objects.filter(project=project).count()
    real = Step.objects.filter(trace__project__slug="real").values_list("agent", "kind", "content")
    pool = [(a[:200], k, t[:MAX_STEP_CHARS]) for a, k, t in real if t.strip()]
    more = (min_steps - have) // mean_steps + 1_000
    t0 = time.perf_counter()
    added = load_traces(project, pool, n_traces, more, mean_steps, random.Random(n_traces), t0)
    print(f"topped up: {more:,} traces, {added:,} steps with the step index present in "
          f"{time.perf_counter() - t0:.0f} s: {have + added:,} steps ({load()})")  # fmt: skip


def fill(n_traces: int, mean_steps: int) -> None:
    """A fresh database: the project (COPY, the step indexes dropped), then ``step_indexes`` and
    ``labels``."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from traces.projects.services import project_create

    User = get_user_model()
    manager = User.objects.create_user("bench-manager")
    pool = real_pool(manager)
    project = project_create(name="Corpus bench", slug="bench", by=manager)
    t0 = time.perf_counter()
    with connection.cursor() as c:  # the step indexes are built after the load (the migrations build them)
        c.execute("DROP INDEX IF EXISTS step_content_trgm")
        c.execute("DROP INDEX IF EXISTS step_words_gin")
        c.execute("DROP INDEX IF EXISTS step_long_words")
    n_steps_total = load_traces(project, pool, 0, n_traces, mean_steps, random.Random(32), t0)
    print(f"loaded {n_traces:,} traces and {n_steps_total:,} steps in {time.perf_counter() - t0:.0f} s ({load()})")


def _build(label: str, statements: list[str]) -> str:
    """Run ``statements`` on a connection of this thread's own (maintenance_work_mem 1 GB each: two run
    side by side); say how long they took."""
    from django.db import connection

    t = time.perf_counter()
    try:
        with connection.cursor() as c:
            c.execute("SET maintenance_work_mem = '1GB'")
            for sql in statements:
                c.execute(sql)
    finally:
        connection.close()
    return f"{label} in {time.perf_counter() - t:.0f} s"


def step_indexes() -> None:
    """The step indexes the load dropped, each only where missing (a build stopped halfway resumes):
    the trigram index, then the word index beside the vocabulary and the long words' index (two
    connections: one core each)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    with connection.cursor() as c:
        c.execute("SELECT array_agg(indexname::text) FROM pg_indexes WHERE tablename = 'traces_step'")
        have = set(c.fetchone()[0] or ())
        c.execute("SELECT EXISTS (SELECT 1 FROM traces_searchword)")
        vocabulary_filled = c.fetchone()[0]
    # the vocabulary and the long words' index, as migration 0020 builds them (the indexer keeps them after)
    vocabulary = import_module("traces.migrations.0020_search_words")
    trigram = ["CREATE INDEX step_content_trgm ON traces_step USING gin (content gin_trgm_ops) WHERE searchable"]
    words = ["CREATE INDEX step_words_gin ON traces_step USING gin (step_words(content)) WHERE searchable IS TRUE"]
    rest = [] if vocabulary_filled else [vocabulary.FILL]
    if "step_long_words" not in have:
        rest.append(f"CREATE INDEX step_long_words {vocabulary.INDEXES['step_long_words']}")
    done = []
    if "step_content_trgm" not in have:
        done.append(_build("trigrams", trigram))
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(_build, "words", words)] if "step_words_gin" not in have else []
        jobs += [pool.submit(_build, "the vocabulary and the long words' index", rest)] if rest else []
        done += [job.result() for job in jobs]
    with connection.cursor() as c:
        c.execute("SELECT pg_size_pretty(pg_relation_size('step_content_trgm')), "
                  "pg_size_pretty(pg_relation_size('step_words_gin')), "
                  "pg_size_pretty(pg_total_relation_size('traces_searchword')), "
                  "(SELECT count(*) FROM traces_searchword), "
                  "pg_size_pretty(pg_total_relation_size('traces_step'))")  # fmt: skip
        trgm, word_index, vocab, n_vocab, steps = c.fetchone()
    print(f"step indexes built ({'; '.join(done) or 'all there already'}): trigrams {trgm}, words {word_index}, "
          f"the vocabulary {n_vocab:,} words, {vocab} with its index (steps with their TOAST and indexes: "
          f"{steps}; {load()})")  # fmt: skip


def labels(seed: int = 32) -> None:
    """A closed round of LABELLED traces (two raters, agreed labels), a judge on JUDGED traces, a
    draft round; once (skipped where the closed round is there)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotations.models import Adjudication, Annotation, Rater, Round, RoundAnnotator, RoundTrace
    from traces.models import Project, Trace
    from traces.projects.services import membership_set

    if Round.objects.filter(project__slug="bench", name="Closed round").exists():
        return
    User = get_user_model()
    project = Project.objects.get(slug="bench")
    rng = random.Random(seed)
    now = timezone.now()
    t0 = time.perf_counter()
    with transaction.atomic():  # whole or not at all: a rerun finds it or makes it
        version = project.taxonomy_version
        modes = list(version.modes.order_by("order", "code").values_list("id", "code"))
        ids = list(Trace.objects.filter(project=project).order_by("-id").values_list("id", flat=True)[:JUDGED])
        raters = []
        for r in range(2):
            user = User.objects.create_user(f"bench-rater-{r}")
            membership_set(project=project, user=user, role="annotator")
            raters.append(Rater.objects.create(user=user, kind="human", name=user.username))
        judge = Rater.objects.create(kind="llm", name="bench-judge")
        rnd = Round.objects.create(project=project, name="Closed round", taxonomy_version=version, state="closed",
                                   closed_at=now)  # fmt: skip
        RoundAnnotator.objects.bulk_create(RoundAnnotator(round=rnd, user=r.user) for r in raters)
        labelled = ids[:LABELLED]
        rates = {code: 0.03 + 0.2 * rng.random() for _, code in modes}
        with transaction.atomic():
            cur = connection.connection.cursor()
            copy_rows(cur, "annotations_roundtrace", ["round_id", "trace_id", "order"],
                      ((rnd.pk, t, i) for i, t in enumerate(labelled)))  # fmt: skip
            adj_cols = ["round_id", "trace_id", "mode_id", "decision", "basis", "note", "at"]
            copy_rows(cur, "annotations_adjudication", adj_cols,
                      ((rnd.pk, t, m, "present" if rng.random() < rates[c] else "absent", "adjudicated", "", now)
                       for t in labelled for m, c in modes))  # fmt: skip
            cols = "trace_id rater_id taxonomy_version_id round_id state task_success notes revision source "
            cols += "created_at updated_at submitted_at"
            copy_rows(
                cur,
                "annotations_annotation",
                cols.split(),
                ((t, judge.pk, version.pk, None, "submitted", "unknown", "", 1, "{}", now, now, now) for t in ids),
            )
            cur.execute("SELECT id FROM annotations_annotation WHERE rater_id = %s", [judge.pk])
            aids = [r[0] for r in cur.fetchall()]
            copy_rows(cur, "annotations_modelabel", ["annotation_id", "mode_id", "decision", "evidence", "rationale",
                                                       "confidence"],
                      ((a, m, "present" if rng.random() < rates[c] else "absent", "[]", "", None)
                       for a in aids for m, c in modes))  # fmt: skip
        draft = Round.objects.create(project=project, name="Next round", taxonomy_version=version, state="draft")
        RoundAnnotator.objects.bulk_create(RoundAnnotator(round=draft, user=r.user) for r in raters)
        RoundTrace.objects.bulk_create(RoundTrace(round=draft, trace_id=t, order=i) for i, t in enumerate(ids[-200:]))
        assert Adjudication.objects.filter(round=rnd).exists() and Annotation.objects.filter(rater=judge).exists()
    with connection.cursor() as c:
        c.execute("VACUUM ANALYZE")
    print(f"labels: {LABELLED:,} agreed traces, a judge on {len(ids):,}; built in {time.perf_counter() - t0:.0f} s")


def agree_on_every_trace() -> None:
    """A closed round over every trace not in the draft round, with agreed labels on all of them,
    so that a release of every trace holds a record for each (a release holds the traces with agreed
    labels). COPY; idempotent: a database built before this step gets it on its next run."""
    from django.db import connection, transaction
    from django.utils import timezone

    from annotations.models import Round
    from traces.models import Project

    if Round.objects.filter(project__slug="bench", name="Every trace").exists():
        return
    t0 = time.perf_counter()
    project = Project.objects.get(slug="bench")
    version = project.taxonomy_version
    modes = list(version.modes.order_by("order", "code").values_list("id", flat=True))
    rnd = Round.objects.create(project=project, name="Every trace", taxonomy_version=version, state="closed",
                               closed_at=timezone.now())  # fmt: skip
    rng, now = random.Random(7), timezone.now()
    with transaction.atomic():
        cur = connection.connection.cursor()
        cur.execute("SELECT id FROM traces_trace WHERE project_id = %s AND id NOT IN (SELECT trace_id FROM "
                    "annotations_roundtrace rt JOIN annotations_round r ON r.id = rt.round_id WHERE r.state "
                    "IN ('draft', 'open')) ORDER BY id", [project.pk])  # fmt: skip
        ids = [r[0] for r in cur.fetchall()]
        copy_rows(cur, "annotations_roundtrace", ["round_id", "trace_id", "order"],
                  ((rnd.pk, t, i) for i, t in enumerate(ids)))  # fmt: skip
        decision = ("absent", "present")
        cols = ["round_id", "trace_id", "mode_id", "decision", "basis", "note", "at"]
        rows = ((rnd.pk, t, m, decision[rng.random() < 0.1], "adjudicated", "", now) for t in ids for m in modes)
        copy_rows(cur, "annotations_adjudication", cols, rows)
    with connection.cursor() as c:
        c.execute("ANALYZE annotations_roundtrace")
        c.execute("ANALYZE annotations_adjudication")
    print(f"agreed labels on every trace: a closed round of {len(ids):,} traces, {len(ids) * len(modes):,} "
          f"adjudications in {time.perf_counter() - t0:.0f} s ({load()})")  # fmt: skip


def time_get(client, path: str, runs: int) -> tuple[float, float, int, str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    extra = ""
    for _ in range(runs):
        with CaptureQueriesContext(connection) as ctx:
            t = time.perf_counter()
            resp = client.get(path)
            times.append((time.perf_counter() - t) * 1000)
        if resp.status_code != 200:
            sys.exit(f"{path}: HTTP {resp.status_code} {resp.content[:300]!r}")
        if resp.get("Content-Type", "").startswith("application/json"):
            body = resp.json()
            if "n_steps" in body:
                extra = f"{body['n_steps']:,}{'+' if body.get('capped') else ''} steps / {body['n_traces']:,} traces"
    return statistics.median(times), pct(times, 0.95), len(ctx.captured_queries), extra


RARE = {"quokkafix": 20, "zephyrlint": 200, "marmotcache": 2_000, "otterqueue": 20_000, "lynxbatch": 200_000}


def plant_rare_words() -> None:
    """Words of every rarity: made-up words appended to 20, 200, 2,000, 20,000 and 200,000 random
    steps (a real corpus has words of every rarity; this one repeats a few thousand real steps, so
    each of its own words is in ~9,000 steps or more). Idempotent."""
    from django.db import connection, transaction

    rng = random.Random(99)
    with transaction.atomic(), connection.cursor() as c:
        c.execute("SELECT min(id), max(id) FROM traces_trace WHERE project_id = (SELECT id FROM traces_project "
                  "WHERE slug = 'bench')")  # fmt: skip
        lo, hi = c.fetchone()
        for word, n in RARE.items():
            c.execute("SELECT count(*) FROM traces_step WHERE searchable AND content ~* %s", [rf"\m{word}\M"])
            if c.fetchone()[0]:
                continue
            ids = rng.sample(range(lo, hi + 1), n)
            c.execute("UPDATE traces_step SET content = content || ' ' || %s WHERE trace_id = ANY(%s) AND index = 2",
                      [word, ids])  # fmt: skip
    # the changed steps wait for the indexer again (traces migration 0021), which adds their words
    from traces.search.indexing import steps_index_pending

    steps_index_pending()


def pick_words() -> dict[str, str]:
    """Search words chosen from the real pool by how many of its steps hold them. Every pool step is
    in the big project ~9,000 times (20 M steps from a pool of a few thousand), so a word of one pool
    step matches ~9,000 steps; a word of a trace's own marker ("[run 123456.7]") matches that trace's
    steps only; a word of several pool steps is over the 10,000-step cap."""
    import re
    from collections import Counter

    from traces.models import Step

    texts = [
        t[:MAX_STEP_CHARS] for t in Step.objects.filter(trace__project__slug="real").values_list("content", flat=True)
    ]
    df: Counter = Counter()
    for text in texts:
        df.update(set(re.findall(r"\b[a-z]{6,}\b", text.lower())))
    once = sorted(w for w, n in df.items() if n == 1)
    several = sorted(w for w, n in df.items() if 4 <= n <= 8)
    common = max(df, key=df.get)
    # a phrase: two words in a row of a step holding a word of one step
    for text in texts:
        pair = re.search(r"\b([a-z]{5,}) ([a-z]{5,})\b", text.lower())
        if pair and df[pair.group(1)] == 1:
            break
    return {"once": once[len(once) // 2], "several": several[len(several) // 2], "common": common,
            "phrase": f"{pair.group(1)} {pair.group(2)}"}  # fmt: skip


def searches(client, runs: int) -> None:
    from urllib.parse import urlencode

    from annotations.models import Rater

    api = "/api/projects/bench/search/"
    w = pick_words()
    judge = Rater.objects.get(name="bench-judge").pk
    cases = [(f"word of {n:,} steps ({word})", {"q": word}) for word, n in RARE.items()] + [
        ("phrase of 200 steps", {"q": "zephyrlint", "mode": "phrase"}),
        ("prefix of 2,000 steps (marmotc)", {"q": "marmotc", "mode": "prefix"}),
        ("regex of 200 steps (zephyr\\w+)", {"q": "zephyr\\w+", "mode": "regex"}),
        ("word of one trace (its marker)", {"q": "777777"}),
        (f"word of one pool step ({w['once']})", {"q": w["once"]}),
        (f"word of a few pool steps ({w['several']})", {"q": w["several"]}),
        (f"most common word ({w['common']})", {"q": w["common"]}),
        (f"phrase ({w['phrase']})", {"q": w["phrase"], "mode": "phrase"}),
        ("phrase of one trace (run 777777)", {"q": "run 777777", "mode": "phrase"}),
        (f"prefix ({w['once'][:5]})", {"q": w["once"][:5], "mode": "prefix"}),
        (f"regex ({w['once'][:4]}\\w+)", {"q": w["once"][:4] + "\\w+", "mode": "regex"}),
        (f"regex ({w['once'][:4]}[^ ]+)", {"q": w["once"][:4] + "[^ ]+", "mode": "regex"}),
        ("regex, a whole 2-letter word (\\.py\\b)", {"q": "\\.py\\b", "mode": "regex"}),
        ("short word (ok)", {"q": "ok"}),
        ("phrase of short words (of the)", {"q": "of the", "mode": "phrase"}),
        ("regex (run 7777\\d\\.1\\y)", {"q": "run 7777\\d\\.1\\y", "mode": "regex"}),
        ("word of 2,000 + framework + step kind", {"q": "marmotcache", "framework": "AG2", "kind": "message"}),
        ("word of 2,000 + agreed label present", {"q": "marmotcache", "label": "agreed:1.1:present"}),
        ("word of 2,000 + judge label absent", {"q": "marmotcache", "label": f"{judge}:2.6:absent"}),
    ]
    print(f"\ncorpus search, {runs} GETs each after one ({load()})")
    print(f"{'search':44} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}  matches")
    for name, params in cases:
        path = f"{api}?{urlencode(params)}"
        time_get(client, path, 1)  # the label matrix of a label filter is built once, then cached
        p50, p95, q, extra = time_get(client, path, runs)
        print(f"{name:44} {p50:8.0f} {p95:8.0f} {q:8d}  {extra}")
    p50, p95, q, _ = time_get(client, "/p/bench/search/?q=zephyrlint", runs)
    print(f"{'the page, word of 200 steps':44} {p50:8.0f} {p95:8.0f} {q:8d}")


def pages(client, runs: int) -> None:
    from annotations.models import Round

    draft = Round.objects.get(project__slug="bench", name="Next round")
    closed = Round.objects.get(project__slug="bench", name="Closed round")
    print(f"\npages, {runs} GETs each ({load()})")
    for name, path in [
        ("trace list, first page", "/p/bench/traces/"),
        ("trace list, framework filter", "/p/bench/traces/?framework=AG2"),
        ("trace list, page 1,000", "/p/bench/traces/?page=1000"),
        ("dashboard (agreed labels)", "/p/bench/analytics/"),
        ("round page (draft, 200 traces)", f"/p/bench/rounds/{draft.pk}/"),
        ("round page (closed, 20,000 traces)", f"/p/bench/rounds/{closed.pk}/"),
    ]:
        p50, p95, q, _ = time_get(client, path, runs)
        print(f"{name:34} {p50:8.0f} {p95:8.0f} {q:8d}")


def import_rate(env: dict[str, str]) -> None:
    """bench_import's MAST-Data file into the bench database, the step index present (a child
    process, as a worker would run it)."""
    from django.db import connection

    from traces.search.indexing import steps_index_pending

    print(f"\nimport with the step index present ({load()})")
    seed = str(time.time_ns() % 1_000_000)  # records the project does not hold yet
    subprocess.run([sys.executable, "bench/bench_import.py", "--into", "bench", "--db", BENCH_DB, "--reuse",
                    "--seed", seed, "--out", f"/tmp/mast_bench_import_{seed}.json"],
                   cwd=REPO, env=env, check=False)  # fmt: skip
    with connection.cursor() as c:
        c.execute("SELECT count(*), coalesce(sum(length(content)), 0) FROM traces_step WHERE NOT searchable")
        n, chars = c.fetchone()
    t = time.perf_counter()
    done = steps_index_pending()
    took = time.perf_counter() - t
    print(f"then the indexer: {done:,} steps ({chars / 1024**2:.0f} MB of text; {n:,} were waiting) searchable in "
          f"{took:.1f} s, {chars / 1024**2 / max(took, 1e-9):.1f} MB/s ({load()})")  # fmt: skip


def release(env: dict[str, str]) -> None:
    """In a fresh process (its own peak RSS): ``release_child``."""
    print(f"\nrelease of every trace (a filter on all seven frameworks), JSONL, in a fresh process ({load()})")
    t = time.perf_counter()
    subprocess.run([sys.executable, "bench/bench_corpus.py", "--reuse", "--release-child"], cwd=REPO, env=env,
                   check=False)  # fmt: skip
    print(f"  wall {time.perf_counter() - t:.0f} s, Python and Django start-up included ({load()})")


def release_child() -> None:
    from django.contrib.auth import get_user_model

    from annotations.releases.services import release_build, release_create
    from traces.models import Project

    project = Project.objects.get(slug="bench")
    manager = get_user_model().objects.get(username="bench-manager")
    t = time.perf_counter()
    rel = release_create(project=project, by=manager, enqueue=False, selection="filter",
                         filters={"mas_name": FRAMEWORKS}, title=f"every trace {time.time_ns()}",
                         options={"formats": ["jsonl"], "raters": True, "judge": True, "evidence": True,
                                  "trace_text": False})  # fmt: skip
    rel = release_build(release_id=rel.pk)
    took = time.perf_counter() - t
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM"))
    size = sum(f.size_bytes for f in rel.files.all()) / 1024**2
    peak = int(hwm.split()[1]) / 1024
    print(f"  {rel.n_traces:,} traces, {rel.status}, built in {took:.1f} s, peak RSS {peak:.0f} MB, {size:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--steps-per-trace", type=int, default=21, help="the mean (21: a little over 20M at 1M traces)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--reuse", action="store_true", help="keep the database of an earlier run")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--release-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skip", default="", help="comma-separated: search,pages,import,release")
    args = ap.parse_args()
    env = bench_env(BENCH_DB, MAST_VAR_DIR=str(REPO / "var" / "bench_corpus"))
    fresh = create_bench_db(env, reuse=args.reuse)
    django_setup(env)
    if fresh:
        fill(args.traces, args.steps_per_trace)
    if not args.release_child:  # each stage only where missing: a build stopped halfway resumes with --reuse
        step_indexes()
        labels()
        top_up(20_000_000, args.steps_per_trace)
        agree_on_every_trace()
    if args.release_child:
        release_child()
        return
    if args.build_only:
        return
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-manager"))
    skip = set(args.skip.split(","))
    if "search" not in skip:
        plant_rare_words()
        searches(client, args.runs)
    if "pages" not in skip:
        pages(client, args.runs)
    if "import" not in skip:
        import_rate(env)
    if "release" not in skip:
        release(env)
    print(f"peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
