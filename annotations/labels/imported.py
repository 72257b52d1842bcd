"""Labels that arrive with imported traces, stored without the traces app knowing about them.

``MastDataJudgeHook`` is registered with ``traces.importing.hooks.register_import_hook`` in
``AnnotationsConfig.ready()``. For every newly imported MAST-Data record that carries a
``mast_annotation`` (``{"1.1": 0|1|null, ...}``) it stores one submitted Annotation of the
imported rater "MAST-Data judge" on the project's taxonomy version (MAST v1 when the project has
none), with one ModeLabel per code: 1 -> present, 0 -> absent, null -> no label for that mode.
Codes the version does not have are kept in ``source["unmapped"]`` rather than dropped silently.

Rows are written in bulk in ``on_finish`` (still inside the import transaction): the 1,642-record
file becomes ~1.6k annotations and ~23k labels in a handful of INSERTs.

A record whose trace is already stored (``on_duplicate``; the importer keeps it as a
``TraceSource`` with its labels) gives the trace its labels when the trace has none of this
rater's yet (MAST-Data's AppWorld trajectory stored under two ``trace_id``s, the first without
labels, or a trace first imported from its native file). When the trace already has them, the
record's own labels stay on its source row: one rater has one annotation per trace and version.
"""

from __future__ import annotations

from typing import Any

from annotations.labels.bulk import LabelSet, labels_bulk_write
from annotations.models import Annotation, ModeLabel, Rater
from taxonomy.models import FailureMode
from taxonomy.services import taxonomy_seed_mast
from traces.models import Trace

MAST_DATA_RATER = "MAST-Data judge"
_STATE_KEY = "annotations.mast_data_judge"


def mast_data_rater() -> Rater:
    rater, _ = Rater.objects.get_or_create(
        name=MAST_DATA_RATER,
        defaults={
            "kind": Rater.Kind.IMPORTED,
            "description": "Labels shipped with MAST-Data (mast_annotation), produced by the dataset's LLM judge.",
        },
    )
    return rater


def from_a_release(extra: dict) -> bool:
    """A record of a MAST Studio release (its ``mast_studio`` says how its labels were agreed)."""
    studio = extra.get("mast_studio")
    return isinstance(studio, dict) and "final_source" in studio


class MastDataJudgeHook:
    """Stores MAST-Data's ``mast_annotation`` as the "MAST-Data judge" rater's labels."""

    def on_trace(self, *, batch: Any, trace_id: int, parsed: Any, extra: dict) -> None:
        labels = extra.get("mast_annotation")
        if not labels or from_a_release(extra):
            return  # a release's mast_annotation are its agreed labels (annotations.releases.imported)
        batch.state.setdefault(_STATE_KEY, []).append(
            (trace_id, labels, {"file": extra.get("source_file", ""), "record": extra.get("record_number")})
        )

    def on_duplicate(self, *, batch: Any, content_hash: str, parsed: Any, extra: dict) -> None:
        labels = extra.get("mast_annotation")
        if labels and not from_a_release(extra):
            source = {"file": extra.get("source_file", ""), "record": extra.get("record_number"), "merged": True}
            batch.state.setdefault(_STATE_KEY + ".dup", []).append((content_hash, labels, source))

    def _resolve_duplicates(self, batch: Any, pending: list) -> list:
        dups = batch.state.pop(_STATE_KEY + ".dup", None)
        if not dups:
            return pending
        ids = dict(
            Trace.objects.filter(project=batch.project, content_hash__in={d for d, _, _ in dups}).values_list(
                "content_hash", "id"
            )
        )
        rater = mast_data_rater()
        labelled = set(
            Annotation.objects.filter(trace_id__in=ids.values(), rater=rater, round=None).values_list(
                "trace_id", flat=True
            )
        )
        labelled |= {trace_id for trace_id, _, _ in pending}
        for digest, labels, source in dups:
            trace_id = ids.get(digest)
            if trace_id is not None and trace_id not in labelled:
                labelled.add(trace_id)
                pending.append((trace_id, labels, source))
        return pending

    def on_finish(self, *, batch: Any) -> None:
        pending = self._resolve_duplicates(batch, batch.state.pop(_STATE_KEY, None) or [])
        if not pending:
            return
        version = batch.project.taxonomy_version or taxonomy_seed_mast()
        modes = dict(FailureMode.objects.filter(version=version).values_list("code", "id"))
        rater = mast_data_rater()
        entries = []
        for trace_id, labels, source in pending:
            unmapped = sorted(code for code in labels if code not in modes)
            if unmapped:
                source = {**source, "unmapped": {code: labels[code] for code in unmapped}}
            decisions = {
                code: None if value is None else (ModeLabel.Decision.PRESENT if value else ModeLabel.Decision.ABSENT)
                for code, value in labels.items()
            }
            entries.append(LabelSet(trace_id=trace_id, rater=rater, labels=decisions, source=source))
        labels_bulk_write(entries=entries, version=version, mode_ids=modes)
