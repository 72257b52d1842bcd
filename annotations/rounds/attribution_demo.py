"""Demo of failure attribution: three Who&When-shaped traces (written for this project, in
annotations/demo_data/whowhen/) imported with their ground truth, and a closed attribution round
(``Round.Kind.ATTRIBUTION``) in which alice, bob and carol attributed them differently, with the
disagreements adjudicated: the Rounds trend draws it as the attribution series."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Round
from annotations.rounds.attribution.consensus import attribution_adjudicate
from annotations.rounds.services import round_close, round_create, round_open, round_start_review
from taxonomy.selectors import version_modes
from traces.importing.service import traces_import

DATA = Path(__file__).resolve().parents[1] / "demo_data" / "whowhen"
ROUND = "Attribution round (Who&When)"
# Per trace (by question id): each annotator's (decisive step, agent, reason); None = no single step.
ANSWERS = {
    "ww-1": {
        "alice": (1, "Coder", "17 * 3 is 51, not 41: the error every later step repeats."),
        "bob": (1, "Coder", "The multiplication is wrong here."),
        "carol": (1, "Coder", "Wrong product; the Verifier only echoes it."),
    },
    "ww-2": {
        "alice": (2, "Planner", "Takes the largest city for the capital."),
        "bob": (1, "WebSurfer", "The search result never mentions the capital."),
        "carol": (3, "Verifier", "Agrees without checking."),
    },
    "ww-3": {
        "alice": (0, "Planner", "Spiders have eight legs; the plan says six."),
        "bob": (0, "Planner", "The wrong fact enters at the plan."),
        "carol": None,
    },
}
PRESENT = {"ww-1": "3.3", "ww-2": "3.3", "ww-3": "1.1"}  # every annotator agrees on the modes
DECISIONS = {
    "ww-2": (2, "The WebSurfer's result was incomplete but not wrong; the Planner's reading decided it."),
    "ww-3": (0, "The wrong fact is in the plan at step 0; nothing later could recover."),
}


def _label(rnd: Round, user, trace, answer, present: str) -> None:
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=rnd.taxonomy_version, round=rnd)
    codes = [m.code for m in version_modes(version=rnd.taxonomy_version)]
    labels = [{"code": c, "decision": "present" if c == present else "absent"} for c in codes]
    if answer is None:
        attribution = {"no_single_step": True, "reason": "Several small slips add up."}
    else:
        attribution = {"step": answer[0], "agent": answer[1], "modes": [present], "reason": answer[2]}
    ann = annotation_save(
        annotation=ann, by=user, base_revision=ann.revision, labels=labels, task_success="no", attribution=attribution
    )
    annotation_submit(annotation=ann, by=user, base_revision=ann.revision)


def seed(ctx) -> None:
    project, users, manager = ctx.project, ctx.users, ctx.users["manager"]
    result = traces_import(project=project, paths_or_files=sorted(DATA.glob("*.json")), by=manager)
    traces = {t.external_id: t for t in project.traces.filter(format="whowhen", external_id__in=list(ANSWERS))}
    if Round.objects.filter(project=project, name=ROUND).exists() or len(traces) < len(ANSWERS):
        ctx.say(f"Attribution: {result.imported} Who&When traces imported; '{ROUND}' already there")
        return
    with transaction.atomic():
        rnd = round_create(
            project=project,
            name=ROUND,
            taxonomy_version=project.taxonomy_version,
            annotators=[users["alice"], users["bob"], users["carol"]],
            method="manual",
            trace_ids=[traces[q].pk for q in ANSWERS],
            kind=Round.Kind.ATTRIBUTION,  # the mode labels are context: it joins the attribution trend only
            by=manager,
        )
        round_open(round=rnd, by=manager)
        for qid, per_user in ANSWERS.items():
            for name, answer in per_user.items():
                _label(rnd, users[name], traces[qid], answer, PRESENT[qid])
        round_start_review(round=rnd, by=manager)
        for qid, (step, note) in DECISIONS.items():
            attribution_adjudicate(
                round=rnd, trace=traces[qid], step=step, modes=[PRESENT[qid]], reason=note, note=note, by=manager
            )
        round_close(round=rnd, by=manager)
    ctx.say(
        f"Attribution: {len(traces)} Who&When traces with ground truth; '{ROUND}' closed "
        "(alice, bob, carol attributed differently; 1 unanimous, 2 adjudicated)"
    )
