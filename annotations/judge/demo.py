"""Demo data for the LLM judge: a finished baseline run over the demo project (no API key needed).

Runs synchronously inside `seed_demo` (the demo worker starts after seeding): the run is created
and processed in this process through the same services a worker would call, with the INLINE
dispatcher (annotations/judge/dispatch.py), so nothing is sent to Celery. The baseline is
trained on the project's agreed labels when there are enough, else on the MAST-Data judge labels
imported with the demo traces. Idempotent: an existing finished baseline run is kept.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from annotations.judge.dispatch import INLINE
from annotations.judge.prompts import prompt_template_active
from annotations.judge.runs import judge_run_create, judge_run_start
from annotations.models import JudgeRun


def seed(ctx) -> None:
    project = ctx.project
    if project.taxonomy_version is None or not project.traces.exists():
        ctx.say("LLM judge: skipped (no taxonomy version or no traces)")
        return
    prompt_template_active(taxonomy_version=project.taxonomy_version, by=ctx.users["manager"])
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
    trained = run.baseline_info.get("trained_on", "?")
    ctx.say(f"LLM judge: baseline run #{run.pk} {run.state}: {run.n_done} traces labelled (trained on {trained})")
