"""Demo step: a promoted open code. alice and bob both tagged traces "same code resubmitted" and
bob tagged the OpenManus trace "hits step limit" (``annotations.labels.demo``); the manager
promotes "hits step limit" to a new mode 1.6 in the draft of the next MAST version, drafted from
the newest published version (Round 2's refined MAST v2), seeded from bob's annotation. The
open-codes page shows the promotion and the draft's mapping records it right after ``make demo``.
Idempotent: a code already promoted (or missing: renamed or merged since) is left alone."""

from __future__ import annotations

from annotations.codes.selectors import promote_sources
from annotations.codes.services import open_code_promote
from annotations.models import OpenCode

CODE = "hits step limit"
MODE = {
    "mode_code": "1.6",
    "name": "Step budget exhausted",
    "definition": (
        "The system keeps working until an external step, turn or token limit stops it, without "
        "having reached or reported a result: the limit ends the run, not the agents."
    ),
}


def seed(ctx) -> None:
    project = ctx.project
    project.refresh_from_db()
    code = OpenCode.objects.filter(project=project, name=CODE).first()
    if code is None or code.promoted_mode_id:
        ctx.say("Open codes: nothing to promote" if code is None else f"Open codes: '{CODE}' already promoted")
        return
    sources = promote_sources(project=project)
    if not sources:
        return
    mode = open_code_promote(project=project, code=code, by=ctx.users["manager"], source=sources[-1], **MODE)
    ctx.say(
        f"Open codes: '{CODE}' promoted to {mode.code} {mode.name} in the draft {mode.version.label} "
        f"(from {sources[-1].label}); see the project's Open codes tab"
    )
