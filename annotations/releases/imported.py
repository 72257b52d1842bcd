"""A release comes back: its JSONL imported into a project keeps what it says.

``ReleaseLabelsHook`` (registered in ``AnnotationsConfig.ready()``) sees the records of a MAST
Studio release (their ``mast_studio`` carries ``final_source``) as the trace import stores them:

* the agreed labels (``mast_annotation``) become the consensus of one CLOSED round per release,
  named after where they came from ("release v3 of demo"; a file of an older release, which does
  not name itself, gives "release file <name>"), one adjudication per decided mode with the
  release's basis (unanimous, adjudicated, or a majority), so the project's agreed labels, its
  analytics and its next release hold them. The round is written in its final state, as MAST's
  imported rounds are: it records decisions that were made, it replays no workflow.
* the raters' and judges' own labels (``raters``, ``judge``, when the release included them)
  become imported raters, one per name, "<name> (release v3 of demo)", outside rounds.

The labels are read on the project's working version (MAST when it has none): a code the version
does not have refuses the import, naming it, rather than dropping the label. MAST-Data's own
files (no ``mast_studio``) keep going to the "MAST-Data judge" (``annotations.labels.imported``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotations.labels.bulk import LabelSet, labels_bulk_write
from annotations.labels.imported import from_a_release
from annotations.models import Adjudication, Rater, Round, RoundTrace
from annotations.rounds.imported import closed_round_record
from taxonomy.models import FailureMode
from taxonomy.services import taxonomy_seed_mast
from traces.importing.results import TraceImportError

_STATE_KEY = "annotations.release_labels"
_BASIS = {
    "unanimous": Adjudication.Basis.UNANIMOUS,
    "adjudicated": Adjudication.Basis.ADJUDICATED,
}
_DECISION = {1: "present", 0: "absent"}


def release_source(studio: dict, source_file: str) -> str:
    """Where a release record's labels come from, as rounds and raters are named."""
    release = studio.get("release")
    if isinstance(release, dict) and release.get("project") and release.get("number") is not None:
        return f"release v{release['number']} of {release['project']}"
    return f"release file {source_file or 'upload'}"


class ReleaseLabelsHook:
    """Stores a re-imported release's agreed labels as a closed round, its raters' as imported raters."""

    def on_trace(self, *, batch: Any, trace_id: int, parsed: Any, extra: dict) -> None:
        if from_a_release(extra):
            batch.state.setdefault(_STATE_KEY, []).append((trace_id, extra))

    def on_finish(self, *, batch: Any) -> None:
        pending = batch.state.pop(_STATE_KEY, None)
        if not pending:
            return
        project = batch.project
        version = project.taxonomy_version or taxonomy_seed_mast()
        mode_ids = dict(FailureMode.objects.filter(version=version).values_list("code", "id"))
        by_source: dict[str, list[tuple[int, dict]]] = defaultdict(list)
        for trace_id, extra in pending:
            _check_codes(extra, mode_ids, version)
            by_source[release_source(extra["mast_studio"], extra.get("source_file", ""))].append((trace_id, extra))
        for source, records in by_source.items():
            _agreed_round(project, version, mode_ids, source, records, batch.by)
            _raters(version, mode_ids, source, records)


def _check_codes(extra: dict, mode_ids: dict[str, int], version: Any) -> None:
    studio = extra["mast_studio"]
    codes = set(extra.get("mast_annotation") or {})
    for group in ("raters", "judge"):
        for labels in (studio.get(group) or {}).values():
            codes |= set(labels or {})
    unknown = sorted(codes - set(mode_ids))
    if unknown:
        where = f"{extra.get('source_file', '')} record {(extra.get('record_number') or 0) + 1}"
        raise TraceImportError(
            f"{where}: the release's modes {', '.join(unknown)} are not in {version.label}, the project's "
            "taxonomy version; set a version that has them (or map them) before importing the release"
        )


def _agreed_round(project: Any, version: Any, mode_ids: dict, source: str, records: list, by: Any) -> None:
    rnd = Round.objects.filter(project=project, name=source, imported_from__startswith=source).first()
    if rnd is None:
        imported_from = f"{source}: {records[0][1].get('source_file', '')}"
        rnd = closed_round_record(
            project=project, name=source, version=version, source=source, imported_from=imported_from, by=by
        )
    have = set(RoundTrace.objects.filter(round=rnd).values_list("trace_id", flat=True))
    new = [(t, extra) for t, extra in records if t not in have]
    RoundTrace.objects.bulk_create(
        RoundTrace(round=rnd, trace_id=t, order=len(have) + i) for i, (t, _e) in enumerate(new)
    )
    rows = []
    for trace_id, extra in new:
        basis = extra["mast_studio"].get("final_basis") or {}
        for code, value in (extra.get("mast_annotation") or {}).items():
            if value not in _DECISION:
                continue  # undecided in the release: no consensus row
            kind = basis.get(code, "")
            rows.append(
                Adjudication(
                    round=rnd,
                    trace_id=trace_id,
                    mode_id=mode_ids[code],
                    decision=_DECISION[value],
                    basis=_BASIS.get(kind, Adjudication.Basis.MAJORITY),
                    note=f"Imported from {source} (its basis: {kind or 'not given'}).",
                )
            )
    Adjudication.objects.bulk_create(rows, batch_size=5000)


def _raters(version: Any, mode_ids: dict, source: str, records: list) -> None:
    entries: list[LabelSet] = []
    raters: dict[str, Rater] = {}
    for trace_id, extra in records:
        studio = extra["mast_studio"]
        for group, what in (("raters", "rater"), ("judge", "LLM judge")):
            for name, labels in (studio.get(group) or {}).items():
                key = f"{name} ({source})"
                if key not in raters:
                    raters[key], _ = Rater.objects.get_or_create(
                        name=key,
                        defaults={
                            "kind": Rater.Kind.IMPORTED,
                            "description": f"The {what} {name!r}'s labels in {source}.",
                        },
                    )
                decisions = {c: _DECISION.get(v) for c, v in (labels or {}).items()}
                entries.append(
                    LabelSet(trace_id=trace_id, rater=raters[key], labels=decisions, source={"import": source})
                )
    if entries:
        labels_bulk_write(entries=entries, version=version, mode_ids=mode_ids)
