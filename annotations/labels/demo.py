"""Demo labels outside rounds: alice and bob each have a submitted and a draft annotation on the
framework traces, with evidence, rationales and a few open codes. Idempotent: an annotation that
already has a revision is left as it is (people may have edited it since)."""

from __future__ import annotations

from annotations.labels.services import (
    annotation_get_or_create,
    annotation_reopen,
    annotation_save,
    annotation_submit,
)
from annotations.labels.visibility import BLIND_ROUND_STATES

# (user, framework, submit?, {code: (decision, [step indexes], rationale)}, task_success, notes, open codes)
PLAN = [
    (
        "alice",
        "ChatDev",
        True,
        {
            "1.3": ("present", [3, 5], "The Programmer sends the same unchanged code after every review."),
            "3.2": ("present", [6], "Nobody runs the program before it is declared done."),
        },
        "no",
        "Classic loop: review comments never reach the code.",
        ["same code resubmitted"],
    ),
    (
        "alice",
        "MetaGPT",
        False,
        {
            "3.3": ("present", [2], "The reviewer approves tests that expect the wrong median."),
            "1.1": ("unsure", [], ""),
        },
        "no",
        "",
        ["wrong expected value in tests"],
    ),
    (
        "bob",
        "AG2",
        True,
        {"2.6": ("present", [3], "The executed result is 27 but the assistant answers 32.")},
        "no",
        "",
        ["answer ignores tool output"],
    ),
    (
        "bob",
        "OpenManus",
        False,
        {"1.3": ("present", [1, 2], "The same web search again and again."), "1.5": ("unsure", [], "")},
        "unknown",
        "Stops only at the step limit.",
        ["hits step limit", "same code resubmitted"],
    ),
]


def seed(ctx) -> None:
    project = ctx.project
    project.refresh_from_db()
    version = project.taxonomy_version
    codes = list(version.modes.order_by("order", "code").values_list("code", flat=True))
    traces = project.traces.defer("raw_text").exclude(round_traces__round__state__in=BLIND_ROUND_STATES)
    made = 0
    for username, framework, submit, given, task_success, notes, open_codes in PLAN:
        trace = traces.filter(mas_name__iexact=framework).order_by("id").first()
        user = ctx.users[username]
        if trace is None:
            continue
        annotation = annotation_get_or_create(trace=trace, user=user, taxonomy_version=version)
        if annotation.revision:
            continue
        labels = []
        for code in codes:
            decision, steps, rationale = given.get(code, ("absent" if submit else "", [], ""))
            if not decision:
                continue
            evidence = [{"step": i} for i in steps if i < trace.n_steps]
            labels.append({"code": code, "decision": decision, "evidence": evidence, "rationale": rationale})
        annotation = annotation_save(
            annotation=annotation,
            by=user,
            base_revision=0,
            labels=labels,
            task_success=task_success,
            notes=notes,
            open_codes=open_codes,
        )
        if submit:
            annotation = annotation_submit(annotation=annotation, by=user, base_revision=annotation.revision)
            if not made:  # the first one was changed on purpose: submitted, reopened, changed, submitted again
                annotation = annotation_reopen(annotation=annotation, by=user, base_revision=annotation.revision)
                annotation = annotation_save(
                    annotation=annotation,
                    by=user,
                    base_revision=annotation.revision,
                    labels=labels,
                    task_success=task_success,
                    notes=f"{notes} (Reopened to add this note.)".strip(),
                    open_codes=open_codes,
                )
                annotation_submit(annotation=annotation, by=user, base_revision=annotation.revision)
        made += 1
    ctx.say(
        f"Workspace: {made} annotations by alice and bob outside rounds (submitted and drafts, with evidence "
        "and open codes, one reopened and submitted again); log in as alice to see her queue"
    )
