"""What an annotation's saved state may hold, and its normalised form: the limits, the decisions,
the checks of labels, evidence, notes and open codes (``annotations.labels.services`` applies
them to every save, and refuses the whole save on any problem; the screen reads the limits).
"""

from __future__ import annotations

from typing import Any

from annotations.labels import sql
from annotations.labels.attribution import attribution_clean, clean_text, is_int
from annotations.models import Annotation
from taxonomy.models import FailureMode, TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Trace

MAX_RATIONALE = 2_000
MAX_NOTES = 10_000
MAX_OPEN_CODE = 80
MAX_OPEN_CODES = 50
MAX_EVIDENCE = 50
DECISIONS = ("present", "absent", "unsure")
FINAL_DECISIONS = ("present", "absent")


def version_mode_order(version: TaxonomyVersion) -> dict[str, tuple[int, tuple]]:
    """{code: (mode id, sort key)} for a version (taxonomy.selectors.version_modes, cached when published)."""
    return {m.code: (m.pk, (i,)) for i, m in enumerate(version_modes(version=version))}


def _clean_evidence(items: Any, where: str, trace: Trace, errors: list, wanted_steps: dict[int, str]) -> list[dict]:
    if items is None:
        return []
    if not isinstance(items, list):
        errors.append({"field": where, "message": "evidence must be a list of {step} or {lines} items."})
        return []
    if len(items) > MAX_EVIDENCE:
        errors.append({"field": where, "message": f"at most {MAX_EVIDENCE} evidence items per mode, got {len(items)}."})
        return []
    clean: list[dict] = []
    for j, item in enumerate(items):
        here = f"{where}[{j}]"
        if isinstance(item, dict) and set(item) == {"step"} and is_int(item["step"]):
            value = {"step": item["step"]}
            wanted_steps.setdefault(item["step"], here)
        elif (
            isinstance(item, dict)
            and set(item) == {"lines"}
            and isinstance(item["lines"], list)
            and len(item["lines"]) == 2
            and all(is_int(n) for n in item["lines"])
        ):
            first, last = item["lines"]
            if not 1 <= first <= last <= trace.n_lines:
                errors.append(
                    {
                        "field": here,
                        "message": f"lines {first}-{last} are outside the trace (lines 1-{trace.n_lines}).",
                    }
                )
                continue
            value = {"lines": [first, last]}
        else:
            errors.append({"field": here, "message": 'evidence must be {"step": <index>} or {"lines": [first, last]}.'})
            continue
        if value not in clean:
            clean.append(value)
    return clean


def _clean_labels(
    labels: Any, *, modes: dict, version: Any, trace: Any, errors: list[dict[str, str]], wanted_steps: dict[int, str]
) -> list[dict[str, Any]]:
    """The mode labels, each checked (a known code once, a decision, evidence, a rationale); the
    steps their evidence names go into ``wanted_steps`` (index -> field) to be looked up at once."""
    if not isinstance(labels, list):
        errors.append({"field": "labels", "message": "must be a list."})
        labels = []
    seen: set[str] = set()
    clean_labels = []
    for i, label in enumerate(labels):
        where = f"labels[{i}]"
        if not isinstance(label, dict):
            errors.append({"field": where, "message": "must be an object {code, decision, evidence, rationale}."})
            continue
        code = label.get("code")
        if not isinstance(code, str) or code not in modes:
            other = (
                FailureMode.objects.filter(code=code).exclude(version=version).select_related("version__taxonomy")
                if isinstance(code, str)
                else None
            )
            hint = f" (it is a mode of {other[0].version.label})" if other else ""
            errors.append(
                {
                    "field": f"{where}.code",
                    "message": f"unknown mode code {code!r} for {version.label}{hint}; "
                    f"known codes: {', '.join(sorted(modes, key=lambda c: modes[c][1]))}.",
                }
            )
            continue
        if code in seen:
            errors.append({"field": f"{where}.code", "message": f"mode {code} is listed twice."})
            continue
        seen.add(code)
        decision = label.get("decision")
        if decision not in DECISIONS:
            errors.append(
                {
                    "field": f"{where}.decision",
                    "message": f"mode {code}: decision must be one of {', '.join(DECISIONS)}, got {decision!r}.",
                }
            )
            continue
        evidence = _clean_evidence(label.get("evidence"), f"{where}.evidence", trace, errors, wanted_steps)
        rationale = clean_text(label.get("rationale"), f"{where}.rationale", MAX_RATIONALE, errors)
        clean_labels.append({"code": code, "decision": decision, "evidence": evidence, "rationale": rationale})
    return clean_labels


def _check_steps(*, trace: Any, wanted_steps: dict[int, str], known_steps: frozenset[int], errors: list) -> None:
    """One query for every evidence step not already stored: those not in the trace are errors."""
    for index in known_steps:
        wanted_steps.pop(index, None)
    if wanted_steps:
        found = sql.steps_present(trace_id=trace.pk, indexes=list(wanted_steps))
        for index, where in wanted_steps.items():
            if index not in found:
                errors.append(
                    {
                        "field": where,
                        "message": f"step {index} does not exist in this trace (it has {trace.n_steps} steps).",
                    }
                )


def _clean_open_codes(open_codes: Any, errors: list[dict[str, str]]) -> list[str]:
    """The open codes, whitespace collapsed, each once, within the limits."""
    codes: list[str] = []
    if open_codes is None:
        open_codes = []
    if not isinstance(open_codes, list):
        errors.append({"field": "open_codes", "message": "must be a list of short texts."})
        open_codes = []
    if len(open_codes) > MAX_OPEN_CODES:
        errors.append({"field": "open_codes", "message": f"at most {MAX_OPEN_CODES} codes, got {len(open_codes)}."})
    for i, raw in enumerate(open_codes):
        if not isinstance(raw, str) or not raw.strip():
            errors.append({"field": f"open_codes[{i}]", "message": "an open code is a non-empty text."})
            continue
        name = " ".join(raw.split())
        if len(name) > MAX_OPEN_CODE:
            errors.append(
                {
                    "field": f"open_codes[{i}]",
                    "message": f"{name[:20]!r}... is {len(name)} characters; the limit is {MAX_OPEN_CODE}.",
                }
            )
            continue
        if name not in codes:
            codes.append(name)
    return codes


def content_clean(
    *,
    annotation: Annotation,
    labels: Any,
    task_success: Any,
    notes: Any,
    open_codes: Any,
    known_steps: frozenset[int] = frozenset(),
    attribution: Any = None,
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """Validate a whole annotation state: (it normalised, labels in mode order; []) or (None, the
    problems, each {field, message}, in the order found).

    ``known_steps``: step indexes already stored as evidence of this annotation (checked when they
    were saved; steps of an imported trace never change), so an autosave re-checks only new ones.
    """
    errors: list[dict[str, str]] = []
    version = annotation.taxonomy_version
    modes = version_mode_order(version)
    trace = annotation.trace
    wanted_steps: dict[int, str] = {}
    clean_labels = _clean_labels(
        labels, modes=modes, version=version, trace=trace, errors=errors, wanted_steps=wanted_steps
    )
    _check_steps(trace=trace, wanted_steps=wanted_steps, known_steps=known_steps, errors=errors)
    if task_success is None:
        task_success = Annotation.TaskSuccess.UNKNOWN
    if task_success not in Annotation.TaskSuccess.values:
        errors.append({"field": "task_success", "message": f"must be yes, no or unknown, got {task_success!r}."})
    notes = clean_text(notes, "notes", MAX_NOTES, errors)
    codes = _clean_open_codes(open_codes, errors)
    clean_attribution = attribution_clean(
        attribution,
        trace_id=trace.pk,
        n_steps=trace.n_steps,
        codes=set(modes),
        order={c: v[1] for c, v in modes.items()},
        errors=errors,
    )
    if errors:
        return None, errors
    clean_labels.sort(key=lambda lab: modes[lab["code"]][1])
    content = {
        "task_success": task_success,
        "notes": notes,
        "open_codes": sorted(codes),
        "labels": clean_labels,
        "attribution": clean_attribution,
    }
    return content, []


def missing_decisions(*, annotation: Annotation, labels: list[dict]) -> list[str]:
    """The version's modes without a present or absent decision in ``labels``, in mode order."""
    modes = version_mode_order(annotation.taxonomy_version)
    decided = {lab["code"] for lab in labels if lab["decision"] in FINAL_DECISIONS}
    return [code for code in sorted(modes, key=lambda c: modes[c][1]) if code not in decided]
