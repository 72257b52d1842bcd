"""Fixtures for the judge tests: the scripted chat-completions server and traces to label."""

from __future__ import annotations

import hashlib

import pytest

from tests.llm_server import LLMServer


@pytest.fixture
def llm_server():
    server = LLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def fast_retries(settings):
    """In-process judge work with short backoffs (the policy is the same, the waits are shorter)."""
    settings.MAST_JUDGE_BACKOFF_BASE = 0.05
    settings.MAST_JUDGE_BACKOFF_CAP = 0.5
    settings.MAST_JUDGE_MAX_ATTEMPTS = 4
    return settings


def make_judge_traces(project, n: int, *, n_steps: int = 4, words: str = "", start: int = 0):
    """n traces with steps; trace k's text mentions `words` (to give the baseline something to learn)."""
    from traces.models import Step, Trace

    traces = []
    for k in range(start, start + n):
        contents = [f"Planner: task {k} step {i} {words}".strip() for i in range(n_steps)]
        raw = "\n".join(contents)
        trace = Trace.objects.create(
            project=project,
            title=f"judge trace {k}",
            format="plaintext",
            raw_text=raw,
            size_bytes=len(raw),
            content_hash=hashlib.sha256(f"{project.pk}:{k}:{raw}".encode()).hexdigest(),
            n_steps=n_steps,
            mas_name="ChatDev" if k % 2 else "MetaGPT",
        )
        Step.objects.bulk_create(
            Step(
                trace=trace, index=i, agent="Planner" if i % 2 else "Coder", content=c, line_start=i + 1, line_end=i + 1
            )
            for i, c in enumerate(contents)
        )
        traces.append(trace)
    return traces


def post_run_form(client, project, **fields):
    """POST the new-run page with usable defaults for every field but those given."""
    from django.urls import reverse

    data = {"provider": "openai", "traces": "all", "concurrency": 2, "temperature": 0, "max_tokens": 500, "timeout": 10}
    return client.post(reverse("annotations:judge_run_new", kwargs={"slug": project.slug}), {**data, **fields})


def post_run_api(client, project, **fields):
    """POST /api/projects/<slug>/judge-runs/ with an OpenAI-compatible run made of `fields`."""
    return client.post(
        f"/api/projects/{project.slug}/judge-runs/", {"provider": "openai", **fields}, content_type="application/json"
    )


def drive(run):
    """Run a judge run to its end in this process: start, then process claimed items until none is left."""
    from annotations.judge.dispatch import INLINE
    from annotations.judge.runs import judge_run_start
    from annotations.judge.worker import judge_item_process
    from annotations.models import JudgeItem

    judge_run_start(run_id=run.pk, dispatcher=INLINE)
    for _ in range(10_000):
        claimed = list(JudgeItem.objects.filter(run=run, state="running").values_list("id", "claim"))
        if not claimed:
            break
        for item_id, claim in claimed:
            judge_item_process(item_id=item_id, claim=claim, dispatcher=INLINE)
    run.refresh_from_db()
    return run
