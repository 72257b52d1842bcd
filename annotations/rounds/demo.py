"""Demo step: calibration rounds on the demo traces.

- "Pilot round" (closed): alice, bob and carol label the seven framework traces blind with
  MAST v1; they disagree on a few units (2.5 vs 2.6 on the AG2 trace, 3.2 vs 3.3 on MetaGPT...),
  discuss them, the manager adjudicates each with a note and closes the round: its consensus is
  the project's agreed labels, its report is stored.
- A refined definition of 2.5 drafted from the AG2 disagreement: the next MAST version.
- "Round 2" (in review) uses that refined version (opening the round published it): the three
  MAST-Data traces plus two framework traces; one disagreement adjudicated, the others waiting,
  so the Disagreements page shows work in progress and the trend marks the version change.

Labels go through the workspace services (annotation_save / annotation_submit), the rounds
through the round services, as a person would do it. Idempotent: an existing round is kept.
"""

from __future__ import annotations

from django.db import transaction

from annotations.labels.demo import PLAN as LABELS_PLAN
from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Round
from annotations.rounds.services import (
    adjudication_record,
    agreement_report_get,
    disagreement_comment_add,
    round_close,
    round_create,
    round_open,
    round_revise_definition,
    round_start_review,
)
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes

# framework -> {annotator: {code: rationale}}: what each person saw as present.
PILOT = {
    "ChatDev": {
        "alice": {"1.3": "The Programmer resubmits the same code after every review."},
        "bob": {"1.3": "Same code pasted again after each review comment."},
        "carol": {
            "1.3": "Identical resubmissions of the code.",
            "3.2": "Nobody runs the program before approving it.",
        },
    },
    "MetaGPT": {
        "alice": {"3.3": "The reviewer approves tests that expect the wrong median."},
        "bob": {"3.2": "The review does not really check the tests."},
        "carol": {"3.3": "Tests assert a wrong value and the reviewer signs them off."},
    },
    "AG2": {
        "alice": {"2.6": "It computed 27 and then answers 32."},
        "bob": {
            "2.5": "The assistant ignores what the executor returned.",
            "2.6": "The final answer contradicts its own computation.",
        },
        "carol": {"2.6": "Answer 32 after the code printed 27."},
    },
    "HyperAgent": {
        "alice": {"3.2": "The tests are never run.", "3.1": "The Planner stops before the fix is validated."},
        "bob": {"3.2": "No test run before finishing."},
        "carol": {"3.2": "Finishes without asking the Executor to run the tests."},
    },
    "AppWorld": {
        "alice": {"3.2": "Takes the Spotify agent's word without checking."},
        "bob": {"3.2": "The Supervisor never verifies the ratings."},
        "carol": {"3.2": "No verification of the result.", "3.3": "Its 'check' only re-reads the agent's claim."},
    },
    "Magentic-One": {
        "alice": {"2.5": "The WebSurfer said Nagano; the Orchestrator searches Sapporo."},
        "bob": {"2.5": "Ignores the WebSurfer's finding."},
        "carol": {"2.5": "The Orchestrator disregards the WebSurfer.", "2.3": "Drifts to an unrelated city."},
    },
    "OpenManus": {
        "alice": {"1.3": "The same search, again and again.", "1.5": "Never notices it should stop."},
        "bob": {"1.3": "Repeats the identical web search."},
        "carol": {"1.3": "Same query repeated.", "1.5": "Runs into the step limit instead of stopping."},
    },
}

# (framework, code) -> (decision, note) for the pilot's disagreements.
PILOT_DECISIONS = {
    ("ChatDev", "3.2"): ("absent", "The reviewer does run the CLI once (step 5); repetition is the failure."),
    ("MetaGPT", "3.2"): ("absent", "There is a verification step; it is wrong, which is 3.3."),
    ("MetaGPT", "3.3"): ("present", "Tests assert the wrong median and pass review: incorrect verification."),
    ("AG2", "2.5"): ("absent", "The executor is a tool, not another agent's opinion: this is 2.6 only."),
    ("HyperAgent", "3.1"): ("absent", "Stopping is a consequence of the missing test run, not a separate failure."),
    ("AppWorld", "3.3"): ("absent", "No verification at all rather than a wrong one: 3.2."),
    ("Magentic-One", "2.3"): ("absent", "Searching the wrong city follows from ignoring the input (2.5)."),
    ("OpenManus", "1.5"): ("present", "It only stops at the hard step limit: unaware of termination."),
}

ROUND2 = {
    "mast": [
        {"alice": {"1.3": "Repeated steps."}, "bob": {"1.3": "Loops on the same step."}, "carol": {}},
        {"alice": {"3.2": "Result not verified."}, "bob": {"3.2": "No check."}, "carol": {"3.2": "Unverified."}},
        {"alice": {"1.5": "Does not stop."}, "bob": {}, "carol": {"1.5": "Keeps going past the goal."}},
    ],
    "HyperAgent": {"alice": {"3.2": "No test run."}, "bob": {"3.2": "Tests skipped."}, "carol": {"3.2": "No tests."}},
    "Magentic-One": {
        "alice": {"2.5": "Ignores the WebSurfer."},
        "bob": {"2.6": "Its plan says Nagano, its action searches Sapporo."},
        "carol": {"2.5": "Disregards the WebSurfer's result."},
    },
}


def _label(*, round: Round, user, trace, present: dict[str, str]) -> None:
    steps = list(trace.steps.order_by("index").values_list("index", flat=True))
    step = steps[len(steps) // 2] if steps else None
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=round.taxonomy_version, round=round)
    labels = [
        {
            "code": code,
            "decision": "present" if code in present else "absent",
            "evidence": [{"step": step}] if code in present and step is not None else [],
            "rationale": present.get(code, ""),
        }
        for code in (m.code for m in version_modes(version=round.taxonomy_version))
    ]
    ann = annotation_save(annotation=ann, by=user, base_revision=ann.revision, labels=labels)
    annotation_submit(annotation=ann, by=user, base_revision=ann.revision)


def _framework_traces(project) -> dict[str, object]:
    out = {}
    for t in project.traces.exclude(metadata__has_key="mad_record").order_by("id"):
        out.setdefault(t.mas_name, t)
    return out


def _pilot(ctx, traces: dict) -> Round | None:
    project, users, manager = ctx.project, ctx.users, ctx.users["manager"]
    picked = [traces[f] for f in PILOT if f in traces]
    if len(picked) < 2:
        ctx.say("Rounds: the demo traces are missing, no round seeded")
        return None
    with transaction.atomic():
        rnd = round_create(
            project=project,
            name="Pilot round",
            taxonomy_version=project.taxonomy_version,
            annotators=[users["alice"], users["bob"], users["carol"]],
            method="manual",
            trace_ids=[t.pk for t in picked],
            by=manager,
        )
        round_open(round=rnd, by=manager)
        for framework, per_user in PILOT.items():
            if framework in traces:
                for name, present in per_user.items():
                    _label(round=rnd, user=users[name], trace=traces[framework], present=present)
        round_start_review(round=rnd, by=manager)
        disagreement_comment_add(
            round=rnd,
            trace=traces["AG2"],
            mode="2.5",
            by=users["bob"],
            body="The code executor is another agent in AG2, so ignoring its output felt like 2.5 to me.",
        )
        disagreement_comment_add(
            round=rnd,
            trace=traces["AG2"],
            mode="2.5",
            by=users["alice"],
            body="I read 2.5 as ignoring a peer's suggestion; a tool result contradicting the answer is 2.6.",
        )
        for (framework, code), (decision, note) in PILOT_DECISIONS.items():
            if framework in traces:
                adjudication_record(
                    round=rnd, trace=traces[framework], mode=code, decision=decision, note=note, by=manager
                )
        round_close(round=rnd, by=manager)
    return rnd


def _round2(ctx, traces: dict) -> Round | None:
    project, users, manager = ctx.project, ctx.users, ctx.users["manager"]
    mast = list(project.traces.filter(metadata__has_key="mad_record").order_by("id")[:3])
    extra = [traces[f] for f in ("HyperAgent", "Magentic-One") if f in traces]
    picked = mast + extra
    if len(picked) < 2:
        return None
    # The next round uses the refined draft; opening it publishes it (the trend chart marks the change).
    refined = TaxonomyVersion.objects.filter(parent=project.taxonomy_version).order_by("-number").first()
    with transaction.atomic():
        rnd = round_create(
            project=project,
            name="Round 2",
            taxonomy_version=refined or project.taxonomy_version,
            annotators=[users["alice"], users["bob"], users["carol"]],
            method="manual",
            trace_ids=[t.pk for t in picked],
            by=manager,
        )
        round_open(round=rnd, by=manager)
        plan = list(zip(mast, ROUND2["mast"], strict=False)) + [
            (traces[f], ROUND2[f]) for f in ("HyperAgent", "Magentic-One") if f in traces
        ]
        for trace, per_user in plan:
            for name, present in per_user.items():
                _label(round=rnd, user=users[name], trace=trace, present=present)
        round_start_review(round=rnd, by=manager)
        if mast:
            adjudication_record(
                round=rnd,
                trace=mast[0],
                mode="1.3",
                decision="present",
                note="Two of three saw the loop; carol agreed in discussion.",
                by=manager,
            )
            disagreement_comment_add(
                round=rnd,
                trace=mast[0],
                mode="1.3",
                by=users["carol"],
                body="I missed the repeated step at first; yes, it loops.",
            )
    return rnd


def seed(ctx) -> None:
    project = ctx.project
    traces = _framework_traces(project)
    pilot = Round.objects.filter(project=project, name="Pilot round").first() or _pilot(ctx, traces)
    if pilot is None:
        return
    # The refined taxonomy: 2.5 vs 2.6 confused the raters on the AG2 trace.
    if not TaxonomyVersion.objects.filter(parent=pilot.taxonomy_version).exists():
        round_revise_definition(
            round=pilot,
            mode_code="2.5",
            definition=(
                "An agent disregards input or recommendations that another agent in the system gave it "
                "(a peer's suggestion, a reviewer's objection). A tool's or executor's output that the agent "
                "then contradicts is a Reasoning-Action Mismatch (2.6), not this mode."
            ),
            note="Pilot round: raters split on the AG2 trace between 2.5 and 2.6.",
            by=ctx.users["manager"],
        )
    second = Round.objects.filter(project=project, name="Round 2").first() or _round2(ctx, traces)
    for rnd in (pilot, second):
        if rnd is not None:
            agreement_report_get(round=rnd)
    kappa = agreement_report_get(round=pilot).data["mean_pairwise_kappa"]["value"]
    ctx.say(
        f"Rounds: 'Pilot round' closed (mean kappa {kappa:.2f}, adjudicated), 'Round 2' in review, "
        "with MAST v2 (2.5 refined after the pilot's disagreements)"
    )


def seed_blind_round(ctx) -> None:
    """An open round, so the demo shows blind labelling at work: alice has submitted one of its two
    traces, carol none (neither sees the other's labels), and releases withhold its traces."""
    project, users, manager = ctx.project, ctx.users, ctx.users["manager"]
    if Round.objects.filter(project=project, name=BLIND_ROUND).exists():
        ctx.say(f"Rounds: '{BLIND_ROUND}' already open")
        return
    pilot = Round.objects.filter(project=project, name="Pilot round").first()
    if pilot is None:
        return
    # Not the traces the workspace demo labels outside rounds: those must stay labelable.
    taken = {framework.lower() for _user, framework, *_ in LABELS_PLAN}
    picked = [t for t in pilot.traces.order_by("round_traces__order") if t.mas_name.lower() not in taken][:2]
    if len(picked) < 2:
        return
    with transaction.atomic():
        rnd = round_create(
            project=project,
            name=BLIND_ROUND,
            taxonomy_version=project.taxonomy_version,
            annotators=[users["alice"], users["carol"]],
            method="manual",
            trace_ids=[t.pk for t in picked],
            by=manager,
        )
        round_open(round=rnd, by=manager)
        _label(round=rnd, user=users["alice"], trace=picked[0], present={"1.3": "Same step again and again."})
    ctx.say(
        f"Rounds: '{BLIND_ROUND}' open (blind) for alice and carol on {len(picked)} pilot traces; alice has "
        "submitted one; releases withhold these traces until the round closes"
    )


BLIND_ROUND = "Round 3 (blind re-check)"
