"""Helpers for the workspace tests: traces with steps, rounds, non-human raters (no services of ours mocked)."""

from __future__ import annotations

import hashlib

from annotations.models import Annotation, ModeLabel, Rater, Round, RoundAnnotator, RoundTrace
from traces.models import Step, Trace


def make_trace(project, *, n_steps: int = 6, lines_per_step: int = 3, title: str = "", agents=("Planner", "Coder")):
    lines, steps = [], []
    for i in range(n_steps):
        agent = agents[i % len(agents)]
        start = len(lines) + 1
        body = [f"{agent}: step {i} line {k}" for k in range(lines_per_step)]
        lines.extend(body)
        steps.append((i, agent, "\n".join(body), start, start + lines_per_step - 1))
    raw = "\n".join(lines)
    trace = Trace.objects.create(
        project=project,
        title=title or f"trace {Trace.objects.count() + 1}",
        format="plaintext",
        raw_text=raw,
        size_bytes=len(raw.encode()),
        content_hash=hashlib.sha256(f"{project.pk}:{title}:{raw}:{Trace.objects.count()}".encode()).hexdigest(),
        n_steps=n_steps,
        n_lines=len(lines),
        n_chars=len(raw),
        n_agents=len(set(agents)),
        agents=list(agents),
    )
    Step.objects.bulk_create(
        [Step(trace=trace, index=i, agent=a, content=c, line_start=s, line_end=e) for i, a, c, s, e in steps]
    )
    return trace


def make_round(project, *, traces, annotators, state="open", name="Round 1", reveal_in_review=True):
    rnd = Round.objects.create(
        project=project,
        name=name,
        taxonomy_version=project.taxonomy_version,
        state=state,
        reveal_in_review=reveal_in_review,
    )
    for i, trace in enumerate(traces):
        RoundTrace.objects.create(round=rnd, trace=trace, order=i)
    for user in annotators:
        RoundAnnotator.objects.create(round=rnd, user=user)
    return rnd


def make_llm_annotation(trace, *, name="judge-x", codes=("1.1",), round=None, kind=Rater.Kind.LLM):
    rater, _ = Rater.objects.get_or_create(name=name, defaults={"kind": kind})
    ann = Annotation.objects.create(
        trace=trace, rater=rater, taxonomy_version=trace.project.taxonomy_version, round=round
    )
    for mode in trace.project.taxonomy_version.modes.filter(code__in=codes):
        ModeLabel.objects.create(annotation=ann, mode=mode, decision="present", rationale="judge says so")
    return ann


def all_labels(version, decision="absent", **extra):
    return [
        {"code": code, "decision": decision, "evidence": [], "rationale": "", **extra}
        for code in version.modes.order_by("order").values_list("code", flat=True)
    ]


def db_state():
    """Every row the workspace writes, for before/after comparisons."""
    from annotations.models import AnnotationEvent, OpenCode

    return {
        "annotations": sorted(Annotation.objects.values_list("id", "state", "revision", "notes", "task_success")),
        "labels": sorted(
            (a, m, d, str(e), r)
            for a, m, d, e, r in ModeLabel.objects.values_list(
                "annotation_id", "mode_id", "decision", "evidence", "rationale"
            )
        ),
        "events": AnnotationEvent.objects.count(),
        "open_codes": sorted(OpenCode.objects.values_list("project_id", "name")),
        "links": sorted(Annotation.open_codes.through.objects.values_list("annotation_id", "opencode_id")),
    }


def client_for(user):
    """An API client signed in as ``user`` (DRF's force_authenticate: the same user object every request)."""
    from rest_framework.test import APIClient

    c = APIClient()
    c.force_authenticate(user)
    return c


def url(trace, suffix="", round=None):
    """My annotation's API address for the trace (``suffix``: submit/, history/), in ``round`` if given."""
    base = f"/api/projects/{trace.project.slug}/traces/{trace.pk}/annotation/{suffix}"
    return f"{base}?round={round.pk}" if round else base
