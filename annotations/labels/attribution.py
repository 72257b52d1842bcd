"""A rater's failure attribution, as part of their annotation's state.

The state an annotation save sends carries ``attribution``: ``null`` (not attributed) or

    {"step": <step index> | null, "no_single_step": bool, "agent": str, "modes": [codes],
     "reason": str, "errors": [{"step", "mode", "severity", "category", "note"}]}

Rules (``attribution_clean``):

* exactly one of a decisive ``step`` (an existing step index of the trace) or ``no_single_step``;
* ``agent`` defaults to the decisive step's agent (taken from the step, changeable: an empty
  agent is filled in from the step, or, for a step naming none such as a tool output, from the
  nearest step up its span tree that names one: the agent that called the tool; when none does,
  the attribution is refused until an agent is named); with "no single step" it may name an agent
  or stay empty;
* ``modes`` are codes of the annotation's taxonomy version (each once);
* ``reason`` at most 2,000 characters; ``errors`` (TRAIL-style located errors) at most 50, each
  on an existing step, with an optional mode code of the version and severity low/medium/high.

The blind rule needs nothing extra: an attribution is visible exactly where its annotation is.
"""

from __future__ import annotations

from typing import Any

from annotations.models import Annotation, Attribution
from annotations.models.attribution import SEVERITIES
from traces.models import Step

MAX_REASON = 2_000
MAX_ERRORS = 50
MAX_NOTE = 2_000
MAX_AGENT = 200
KEYS = frozenset({"step", "no_single_step", "agent", "modes", "reason", "errors"})


def is_int(v: Any) -> bool:
    """An integer that is not a bool (JSON true/false arrive as bools)."""
    return isinstance(v, int) and not isinstance(v, bool)


def clean_text(value: Any, where: str, limit: int, errors: list) -> str:
    """Text of at most ``limit`` characters (None -> ""); problems go to ``errors`` (services share it)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append({"field": where, "message": "must be text."})
        return ""
    if len(value) > limit:
        errors.append({"field": where, "message": f"is {len(value):,} characters long; the limit is {limit:,}."})
    return value


def _codes(value: Any, where: str, codes: set[str], errors: list) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append({"field": where, "message": "must be a list of mode codes."})
        return []
    out: list[str] = []
    for i, code in enumerate(value):
        if not isinstance(code, str) or code not in codes:
            errors.append(
                {"field": f"{where}[{i}]", "message": f"unknown mode code {code!r} for this taxonomy version."}
            )
        elif code not in out:
            out.append(code)
    return out


# Span trees are shallow (agent -> LLM answer -> tool call -> tool output); a longer walk means a
# malformed tree, and then the agent is asked for rather than guessed.
MAX_CALLER_DEPTH = 16


def _calling_agent(*, trace_id: int, index: int) -> str:
    """The agent of the nearest step up the span tree from step ``index`` that names one (the agent
    that called a tool, for a tool output), or "" when none does."""
    parent = Step.objects.filter(trace_id=trace_id, index=index).values_list("parent_index", flat=True).first()
    for _ in range(MAX_CALLER_DEPTH):
        if parent is None:
            return ""
        row = Step.objects.filter(trace_id=trace_id, index=parent).values_list("agent", "parent_index").first()
        if row is None:
            return ""
        agent, parent = row
        if agent:
            return agent
    return ""


def attribution_clean(
    raw: Any, *, trace_id: int, n_steps: int, codes: set[str], order: dict[str, Any], errors: list
) -> dict | None:
    """Validate an attribution (None = not attributed); append problems to ``errors``."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        errors.append({"field": "attribution", "message": "must be an object or null."})
        return None
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        errors.append({"field": "attribution", "message": f"unknown field(s) {', '.join(unknown)}."})
    step, none = raw.get("step"), raw.get("no_single_step", False)
    if not isinstance(none, bool):
        errors.append({"field": "attribution.no_single_step", "message": "must be true or false."})
        none = False
    if step is not None and not is_int(step):
        errors.append({"field": "attribution.step", "message": "must be a step index (an integer) or null."})
        step = None
    if none and step is not None:
        errors.append(
            {"field": "attribution.step", "message": "give a decisive step or 'no single decisive step', not both."}
        )
    if not none and step is None and not any(e["field"].startswith("attribution.step") for e in errors):
        errors.append(
            {"field": "attribution.step", "message": "a decisive step is needed (or 'no single decisive step')."}
        )
    agent = " ".join(clean_text(raw.get("agent"), "attribution.agent", MAX_AGENT, errors).split())
    modes = sorted(_codes(raw.get("modes"), "attribution.modes", codes, errors), key=lambda c: order.get(c, c))
    reason = clean_text(raw.get("reason"), "attribution.reason", MAX_REASON, errors)
    located = _clean_errors(raw.get("errors"), codes, errors)
    wanted = {s for s in [step, *(e["step"] for e in located)] if is_int(s)}
    agents = (
        dict(Step.objects.filter(trace_id=trace_id, index__in=wanted).values_list("index", "agent")) if wanted else {}
    )
    for index in sorted(wanted - set(agents)):
        errors.append(
            {
                "field": "attribution.step" if index == step else "attribution.errors",
                "message": f"step {index} does not exist in this trace (it has {n_steps} steps).",
            }
        )
    if step is not None and not agent and step in agents:
        agent = agents[step] or _calling_agent(trace_id=trace_id, index=step)
        if not agent:
            errors.append(
                {
                    "field": "attribution.agent",
                    "message": f"step {step} names no agent and neither does any step that led to it (a tool "
                    "output with no calling agent): name the responsible agent.",
                }
            )
    return {
        "step": None if none else step,
        "no_single_step": bool(none),
        "agent": agent,
        "modes": modes,
        "reason": reason,
        "errors": located,
    }


def _clean_errors(value: Any, codes: set[str], errors: list) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append({"field": "attribution.errors", "message": "must be a list."})
        return []
    if len(value) > MAX_ERRORS:
        errors.append({"field": "attribution.errors", "message": f"at most {MAX_ERRORS} located errors."})
        return []
    out = []
    for i, item in enumerate(value):
        where = f"attribution.errors[{i}]"
        if not isinstance(item, dict) or not is_int(item.get("step")):
            errors.append({"field": where, "message": 'must be {"step": <index>, "mode", "severity", ...}.'})
            continue
        mode = item.get("mode") or ""
        if mode and mode not in codes:
            errors.append({"field": f"{where}.mode", "message": f"unknown mode code {mode!r}."})
        severity = item.get("severity") or ""
        if severity and severity not in SEVERITIES:
            errors.append({"field": f"{where}.severity", "message": f"must be one of {', '.join(SEVERITIES)}."})
        out.append(
            {
                "step": item["step"],
                "mode": mode,
                "severity": severity,
                "category": clean_text(item.get("category"), f"{where}.category", MAX_AGENT, errors),
                "note": clean_text(item.get("note"), f"{where}.note", MAX_NOTE, errors),
            }
        )
    return out


def attribution_as_dict(row: Attribution | None) -> dict | None:
    if row is None:
        return None
    return {
        "step": row.decisive_step,
        "no_single_step": row.no_single_step,
        "agent": row.agent,
        "modes": list(row.modes),
        "reason": row.reason,
        "errors": list(row.errors),
    }


def attribution_of(annotation: Annotation) -> dict | None:
    """The stored attribution of an annotation (one query; none for an unsaved one)."""
    if annotation.pk is None:
        return None
    return attribution_as_dict(Attribution.objects.filter(annotation_id=annotation.pk).first())


def attribution_write(*, annotation: Annotation, value: dict | None) -> None:
    """Store the cleaned attribution (None deletes it). Called inside the save's transaction."""
    if value is None:
        Attribution.objects.filter(annotation_id=annotation.pk).delete()
        return
    Attribution.objects.update_or_create(
        annotation_id=annotation.pk,
        defaults={
            "decisive_step": value["step"],
            "no_single_step": value["no_single_step"],
            "agent": value["agent"],
            "modes": value["modes"],
            "reason": value["reason"],
            "errors": value["errors"],
        },
    )
