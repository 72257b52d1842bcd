"""Helpers for the round tests: traces with strata and steps, rounds in a given state, labels.

Labels are written through the real services: annotation_save/annotation_submit (the workspace)
for a few traces, or round_labels_import (bulk) where a test needs many.
"""

from __future__ import annotations

import hashlib
import itertools

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Round
from annotations.rounds.services import round_create, round_open, round_start_review
from traces.models import Step, Trace

_counter = itertools.count()

FRAMEWORKS = ["ChatDev", "MetaGPT", "AG2", "AppWorld"]


def make_traces(project, n: int, *, frameworks=FRAMEWORKS, benchmarks=("ProgramDev", "GSM")) -> list[Trace]:
    out = []
    for i in range(n):
        k = next(_counter)
        raw = f"Planner: plan {k}\nCoder: code {k}\nReviewer: looks fine {k}"
        trace = Trace.objects.create(
            project=project,
            title=f"trace {k}",
            mas_name=frameworks[i % len(frameworks)],
            benchmark=benchmarks[i % len(benchmarks)],
            llm_name="gpt-4o" if i % 3 else "claude",
            format="plaintext",
            raw_text=raw,
            size_bytes=len(raw),
            content_hash=hashlib.sha256(f"{project.pk}:{k}:{raw}".encode()).hexdigest(),
            n_steps=3,
            n_lines=3,
        )
        Step.objects.bulk_create(
            Step(trace=trace, index=j, agent=a, content=line, line_start=j + 1, line_end=j + 1)
            for j, (a, line) in enumerate(zip(["Planner", "Coder", "Reviewer"], raw.split("\n"), strict=True))
        )
        out.append(trace)
    return out


def codes(version) -> list[str]:
    return list(version.modes.order_by("order", "code").values_list("code", flat=True))


def label_via_workspace(*, round: Round, user, trace: Trace, present=(), submit=True, rationale="", evidence_step=None):
    """Label one trace as the user would in the workspace: every mode decided, ``present`` ones yes."""
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=round.taxonomy_version, round=round)
    labels = [
        {
            "code": code,
            "decision": "present" if code in present else "absent",
            "evidence": [{"step": evidence_step}] if (code in present and evidence_step is not None) else [],
            "rationale": rationale if code in present else "",
        }
        for code in codes(round.taxonomy_version)
    ]
    ann = annotation_save(annotation=ann, by=user, base_revision=ann.revision, labels=labels)
    if submit:
        ann = annotation_submit(annotation=ann, by=user, base_revision=ann.revision)
    return ann


def make_open_round(project, *, manager, annotators, traces, name="Round A", reveal_in_review=True) -> Round:
    rnd = round_create(
        project=project,
        name=name,
        taxonomy_version=project.taxonomy_version,
        annotators=annotators,
        method="manual",
        trace_ids=[t.pk for t in traces],
        reveal_in_review=reveal_in_review,
        by=manager,
    )
    return round_open(round=rnd, by=manager)


def make_review_round(
    project, *, manager, annotators, traces, disagree_on=(), name="Round A", reveal_in_review=True, drafts=()
):
    """Open round labelled by everyone: all say 1.1 present except on ``disagree_on`` traces,
    where the first annotator alone also says 1.3 present. Then review starts. ``drafts``: (user,
    trace) pairs saved but not submitted (review then starts anyway); a submitted annotation cannot
    change in review, a draft still can."""
    rnd = make_open_round(
        project, manager=manager, annotators=annotators, traces=traces, name=name, reveal_in_review=reveal_in_review
    )
    for k, user in enumerate(annotators):
        for t in traces:
            present = {"1.1"} | ({"1.3"} if (k == 0 and t in disagree_on) else set())
            label_via_workspace(
                round=rnd,
                user=user,
                trace=t,
                present=present,
                rationale=f"{user.username} saw it",
                evidence_step=1,
                submit=(user, t) not in drafts,
            )
    return round_start_review(round=rnd, by=manager, force=bool(drafts))
