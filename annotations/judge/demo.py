"""Demo data for the LLM judge: the baseline, a scripted "LLM" through a connection (the project's
prompt and the MAST official judge), an imported rater, ready for the comparison page.

Runs synchronously inside `seed_demo` (the demo worker starts after seeding): each run is created
and processed in this process through the same services a worker would call, with the INLINE
dispatcher (annotations/judge/dispatch.py), so nothing is sent to Celery. The "LLM" is
``demo_llm.py``, a scripted chat-completions server on 127.0.0.1 (it is not a model; its
connection is named so). ``make demo`` runs it beside the site for as long as the demo runs
(``manage.py serve_demo_llm``, ``ctx.llm_url``), so the connection's *Test connection* and new
runs work after seeding; without it (``seed_demo()`` in tests) one runs here while seeding.
Idempotent: finished runs and the imported rater are kept.
"""

from __future__ import annotations

import json
import random

from django.core.exceptions import ValidationError

from annotations.judge import demo_llm
from annotations.judge.connections import connection_save
from annotations.judge.dispatch import INLINE
from annotations.judge.imported import rater_import
from annotations.judge.inline import judge_run_drive_inline
from annotations.judge.prompts import prompt_template_active
from annotations.judge.runs import judge_run_create, judge_run_start
from annotations.models import JudgeRun, ProviderConnection, Rater
from annotations.rounds.agreed import agreed_labels

CONNECTION = "Demo stand-in LLM (scripted, not a real model)"
OLD_NAMES = ("Demo scripted LLM (not a model)",)  # the name before the stand-in ran with the demo
MODEL = "demo-reasoner"
IMPORTED = "Lab B labels (demo, synthetic)"
DEMO_KEY = "demo-key-not-a-secret-0000"  # the demo server ignores it; shows the stored-key path


def seed(ctx) -> None:
    project = ctx.project
    if project.taxonomy_version is None or not project.traces.exists():
        ctx.say("LLM judge: skipped (no taxonomy version or no traces)")
        return
    prompt_template_active(taxonomy_version=project.taxonomy_version, by=ctx.users["manager"])
    _baseline(ctx)
    _scripted_llm(ctx)
    _imported(ctx)
    keys = [f"run:{r.pk}" for r in JudgeRun.objects.filter(project=project, state="done", rater__isnull=False)]
    keys += [f"rater:{r.pk}" for r in Rater.objects.filter(name=IMPORTED)]
    query = "&".join(f"s={k}" for k in keys)
    ctx.say(f"LLM judge: compare them at /p/{project.slug}/judge/compare/?{query} (with corrected prevalences)")


def _baseline(ctx) -> None:
    project = ctx.project
    done = JudgeRun.objects.filter(project=project, provider=JudgeRun.Provider.BASELINE, state="done").first()
    if done:
        ctx.say(f"LLM judge: baseline run #{done.pk} already there ({done.n_done} traces)")
        return
    try:
        run = judge_run_create(project=project, by=ctx.users["manager"], provider="baseline", start=False)
        judge_run_start(run_id=run.pk, dispatcher=INLINE)
    except ValidationError as exc:
        ctx.say(f"LLM judge: no baseline run ({'; '.join(exc.messages)})")
        return
    run.refresh_from_db()
    info = run.baseline_info
    ctx.say(
        f"LLM judge: baseline run #{run.pk} {run.state}: {run.n_done} traces labelled "
        f"(trained on {info.get('trained_on', '?')}: {info.get('n_train', 0)} traces)"
    )


def _connection(ctx, url: str) -> ProviderConnection:
    """The demo's connection, pointed at the stand-in on `url` (a connection of an earlier demo,
    under its old name, is renamed and moved)."""
    existing = ProviderConnection.objects.filter(project=ctx.project, name__in=[CONNECTION, *OLD_NAMES]).first()
    return connection_save(
        project=ctx.project,
        by=ctx.users["manager"],
        name=CONNECTION,
        base_url=url,
        models=[MODEL],
        api_key=DEMO_KEY,
        price_in="1.10",
        price_out="4.40",
        connection=existing,
    )


def _scripted_llm(ctx) -> None:
    project = ctx.project
    done = JudgeRun.objects.filter(project=project, state="done", connection__name__in=[CONNECTION, *OLD_NAMES])
    wanted = [p for p in ("openai", "mast") if not done.filter(provider=p).exists()]
    # The project's-prompt judge once more with the cache off: a second draw, for its self-agreement.
    wanted += ["openai"] * max(0, 2 - done.filter(provider="openai").count() - wanted.count("openai"))
    if ctx.llm_url:  # the stand-in scripts/demo.sh runs for as long as the demo runs
        conn = _connection(ctx, ctx.llm_url)
        ctx.say(f"LLM judge: connection “{CONNECTION}” points at the demo's stand-in on {ctx.llm_url}")
        _scripted_runs(ctx, conn, wanted, done)
        return
    if not wanted:
        ctx.say("LLM judge: scripted-LLM runs already there")
        return
    with demo_llm.serve() as url:  # no stand-in running: one in this process while seeding
        _scripted_runs(ctx, _connection(ctx, url), wanted, done)


def _scripted_runs(ctx, conn: ProviderConnection, wanted: list[str], done) -> None:
    if not wanted:
        ctx.say("LLM judge: scripted-LLM runs already there")
    for k, provider in enumerate(wanted):
        again = provider in wanted[:k] or (provider == "openai" and done.filter(provider=provider).exists())
        run = judge_run_create(
            project=ctx.project,
            by=ctx.users["manager"],
            provider=provider,
            connection=conn,
            model=MODEL,
            concurrency=4,
            timeout=10,
            use_cache=not again,
            # the project's prompt with few-shot examples: those traces are left out of its scores
            few_shot=provider == "openai",
            start=False,
        )
        judge_run_drive_inline(run_id=run.pk, threads=1)
        run.refresh_from_db()
        ctx.say(
            f"LLM judge: scripted-LLM run #{run.pk} ({run.get_provider_display()}) {run.state}: "
            f"{run.n_done} traces, {run.tokens_in + run.tokens_out:,} tokens "
            f"({run.tokens_reasoning:,} reasoning), cost {run.cost:.4f}; "
            f"adapted after a 400: {', '.join(run.dropped_params) or 'nothing'}"
            + ("; a re-run with the cache off (self-agreement)" if again else "")
        )
    ctx.say(f"LLM judge: the judge against itself at /p/{ctx.project.slug}/judge/reliability/")


def _imported(ctx) -> None:
    """A second lab's labels: the agreed labels with a fixed share flipped, as a JSONL file."""
    project = ctx.project
    if Rater.objects.filter(name=IMPORTED, annotations__trace__project=project).exists():
        ctx.say(f"LLM judge: imported rater “{IMPORTED}” already there")
        return
    by_trace: dict[int, dict[str, bool]] = {}
    for a in agreed_labels(project=project, taxonomy_version=project.taxonomy_version):
        by_trace.setdefault(a.trace_id, {})[a.mode_code] = a.decision == "present"
    if not by_trace:
        ctx.say("LLM judge: no imported rater (no agreed labels to start from)")
        return
    hashes = dict(project.traces.filter(pk__in=list(by_trace)).values_list("pk", "content_hash"))
    rng = random.Random(14)
    rows = [
        {"content_hash": hashes[t], "modes": {c: (v if rng.random() > 0.15 else not v) for c, v in modes.items()}}
        for t, modes in sorted(by_trace.items())
    ]
    text = "\n".join(json.dumps(r) for r in rows)
    result = rater_import(project=project, by=ctx.users["manager"], name=IMPORTED, text=text, filename="lab-b.jsonl")
    ctx.say(f"LLM judge: imported rater “{IMPORTED}”: {result.n_labels} labels on {result.n_traces} traces")
