"""Ground-truth attribution that arrives with imported traces, stored as the labels of a source rater.

Like MAST-Data's ``mast_annotation`` (``annotations/labels/imported.py``), a dataset's own answer
is kept as one submitted annotation of an imported rater, so a judge is scored against it at once:

* **Who&When** (JSON files and the Hub's Parquet; ``parse_whowhen`` keeps ``mistake_agent``,
  ``mistake_step``, ``mistake_reason`` in the trace metadata): rater "Who&When ground truth",
  decisive step = ``mistake_step`` (an index into ``history``, which is our step index), agent =
  ``mistake_agent`` as the dataset names it, reason = ``mistake_reason``; task success "no".
* **TRAIL** (rows with a ``labels`` column, or ``metadata["trail_labels"]`` set by a span parser:
  ``{"errors": [{"category", "location", "evidence",
  "description", "impact"}]}``): rater "TRAIL ground truth", the errors as located errors, each on
  the step whose span id is ``location``. The span-to-step map comes from the span parser as
  ``metadata["span_ids"]`` (position = step index). TRAIL names no decisive step, so none is stored.

A ground truth that points outside its trace (a step it does not have, a span id no step
carries) refuses the whole import, naming the file, record and value: nothing is stored half.
"""

from __future__ import annotations

import json
from typing import Any

from annotations.models import Annotation, Attribution, Rater
from taxonomy.services import taxonomy_seed_mast
from traces.importing.results import TraceImportError

WHOWHEN_RATER = "Who&When ground truth"
TRAIL_RATER = "TRAIL ground truth"
_STATE_KEY = "annotations.ground_truth_attribution"
IMPACT = {"low": "low", "medium": "medium", "high": "high"}


def source_rater(name: str, description: str) -> Rater:
    rater, _ = Rater.objects.get_or_create(
        name=name, defaults={"kind": Rater.Kind.IMPORTED, "description": description}
    )
    return rater


def _refuse(message: str):

    return TraceImportError(message)


def whowhen_ground_truth(meta: dict, *, n_steps: int, where: str) -> dict | None:
    """{step, agent, reason} from a Who&When record's metadata; None when it has no mistake."""
    agent, step, reason = meta.get("mistake_agent"), meta.get("mistake_step"), meta.get("mistake_reason")
    if agent in (None, "") and step in (None, ""):
        return None
    try:
        index = int(str(step).strip())
    except ValueError:
        raise _refuse(f"{where}: mistake_step {step!r} is not a step number") from None
    if not 0 <= index < n_steps:
        raise _refuse(f"{where}: mistake_step {index} is outside the trace (steps 0-{n_steps - 1})")
    return {"step": index, "agent": " ".join(str(agent or "").split())[:200], "reason": str(reason or "")}


def trail_located_errors(labels: Any, *, span_ids: list[str] | None, where: str) -> list[dict]:
    """TRAIL's errors as located errors (step, category, severity, note)."""
    if isinstance(labels, str):
        try:
            labels = json.loads(labels)
        except ValueError as exc:
            raise _refuse(f"{where}: the labels column is not JSON ({exc})") from None
    errors = labels.get("errors") if isinstance(labels, dict) else None
    if not isinstance(errors, list):
        raise _refuse(f"{where}: labels has no 'errors' list")
    steps: dict[str, int] = {}
    for i, sid in enumerate(span_ids or []):
        steps.setdefault(sid, i)  # a span's first step
    out = []
    for k, err in enumerate(errors):
        if not isinstance(err, dict):
            raise _refuse(f"{where}: labels.errors[{k}] is not an object")
        location = str(err.get("location") or "")
        if location not in steps:
            raise _refuse(
                f"{where}: labels.errors[{k}] is located on span {location!r}, which no step of the trace has"
            )
        note = " ".join(str(err.get(x) or "") for x in ("description", "evidence")).strip()
        out.append(
            {
                "step": steps[location],
                "mode": "",
                "severity": IMPACT.get(str(err.get("impact") or "").strip().lower(), ""),
                "category": str(err.get("category") or "")[:200],
                "note": note[:2000],
            }
        )
    return sorted(out, key=lambda e: e["step"])


class GroundTruthAttributionHook:
    """Import hook: Who&When mistakes and TRAIL located errors -> a source rater's attribution."""

    def on_trace(self, *, batch: Any, trace_id: int, parsed: Any, extra: dict) -> None:
        number = extra.get("record_number")
        unit = "row" if "row" in extra else "record"  # Parquet rows, MAST-Data records
        where = extra.get("source_file", "") + (f", {unit} {number + 1}" if number is not None else "")
        meta = parsed.metadata or {}
        found = None
        if parsed.format == "whowhen":
            truth = whowhen_ground_truth(meta, n_steps=len(parsed.steps), where=where)
            if truth is not None:
                found = (WHOWHEN_RATER, truth | {"errors": []})
        row = extra.get("row") or {}
        labels = row.get("labels", meta.get("trail_labels"))  # a Parquet column, or set by a span parser
        if found is None and labels is not None:
            located = trail_located_errors(labels, span_ids=meta.get("span_ids"), where=where)
            found = (TRAIL_RATER, {"step": None, "agent": "", "reason": "", "errors": located})
        if found is not None:
            batch.state.setdefault(_STATE_KEY, []).append((trace_id, *found, where))

    def on_finish(self, *, batch: Any) -> None:
        pending = batch.state.pop(_STATE_KEY, None)
        if not pending:
            return
        version = batch.project.taxonomy_version or taxonomy_seed_mast()
        raters = {
            WHOWHEN_RATER: source_rater(
                WHOWHEN_RATER, "Who&When's own attribution (mistake_agent, mistake_step, mistake_reason)."
            ),
            TRAIL_RATER: source_rater(TRAIL_RATER, "TRAIL's located errors (category, span, impact)."),
        }
        annotations = Annotation.objects.bulk_create(
            [
                Annotation(
                    trace_id=trace_id,
                    rater=raters[rater],
                    taxonomy_version=version,
                    state=Annotation.State.SUBMITTED,
                    task_success=Annotation.TaskSuccess.NO,
                    revision=1,
                    source={"import": rater, "where": where},
                )
                for trace_id, rater, _, where in pending
            ],
            batch_size=1000,
        )
        Attribution.objects.bulk_create(
            [
                Attribution(
                    annotation_id=ann.pk,
                    decisive_step=truth["step"],
                    agent=truth["agent"],
                    reason=truth["reason"],
                    errors=truth["errors"],
                )
                for ann, (_, _, truth, _) in zip(annotations, pending, strict=True)
            ],
            batch_size=1000,
        )
