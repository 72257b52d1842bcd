"""The records of a dataset release: one MAST-Data-shaped record per trace, streamed in trace id order.

Everything streams: traces are read in id-ordered chunks of ``CHUNK`` (keyset pagination,
``values()``), the labels of one chunk are fetched with one query per kind, and raw trace texts in
batches of at most ``TEXT_BATCH_BYTES``, so memory is bounded by one chunk however long the traces.

The blind rule is applied per chunk: the traces of draft and open rounds in the chunk's id range
are left out (the same rule as ``selectors.release_traces``, read once a chunk rather than as an
anti-join over the whole selection).

Final labels are the project's agreed labels (``annotations.rounds.agreed``: the consensus of
closed rounds), carried to the release's taxonomy version (``taxonomy.mapping``); when a (trace,
mode) has none, the manager may ask for a majority vote of the human raters' submitted labels
(at least two voters, ties stay unknown), flagged ``majority_vote`` per mode. Raters' own labels
go under ``raters`` (people pseudonymised as annotator_1, ...) and machine raters' under ``judge``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, cast

import orjson
from django.db import connection
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from annotations.labels.visibility import open_round_traces
from annotations.models import ModeLabel, Rater, Round
from annotations.releases.selectors import ReleaseSpec, ReleaseStats, _selected_traces, _submitted_annotations
from annotations.rounds.agreed import (
    agreed_adjudications,
    agreed_fold,
    agreed_label_masks,
    agreed_versions,
    majority_vote,
    mask_sum,
    unpack,
)
from annotations.rounds.attribution.consensus import agreed_attributions, attribution_export
from taxonomy.mapping import VersionMapper
from taxonomy.selectors import versions_mode_codes
from traces.models import Project, Trace

CHUNK = 5000
PROGRESS_EVERY = 1000
TEXT_BATCH_BYTES = 32 * 1024 * 1024


_EVIDENCE_CACHE: dict[str, Any] = {}


def _decode_evidence(text: str | None) -> Any:
    """orjson.loads with a bounded cache: evidence values repeat a lot ([{"step": 3}]) and records are
    serialised right away, never mutated, so sharing the decoded object is safe."""
    if not text or text == "[]":
        return []
    value = _EVIDENCE_CACHE.get(text)
    if value is None:
        value = orjson.loads(text)
        if len(_EVIDENCE_CACHE) < 50_000:
            _EVIDENCE_CACHE[text] = value
    return value


def _raw_rows(qs: QuerySet) -> list[tuple]:
    """The rows of a ``values_list`` queryset straight from the cursor, without Django's per-value
    converters (millions of ``int()`` calls on a large release); callers convert what they need."""
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _submitted_labels(*, project: Project) -> QuerySet[ModeLabel]:
    """Submitted labels that are final: outside rounds or in closed rounds (never a round in progress)."""
    return ModeLabel.objects.filter(annotation__trace__project=project, annotation__state="submitted").filter(
        Q(annotation__round__isnull=True) | Q(annotation__round__state=Round.State.CLOSED)
    )


# Machine raters scored against the humans: the LLM judges and the offline baseline classifier are
# released together under "judge"; people and imported label sets under "raters".
JUDGE_KINDS = frozenset({Rater.Kind.LLM, Rater.Kind.BASELINE})


def _rater_names(*, project: Project) -> dict[int, tuple[str, str]]:
    """rater id -> (kind, public name). People are pseudonymised as annotator_1, annotator_2, ... (by rater id)."""
    ids = _submitted_annotations(project=project).values("rater_id")
    out: dict[int, tuple[str, str]] = {}
    n = 0
    for rid, kind, name in Rater.objects.filter(id__in=ids).order_by("id").values_list("id", "kind", "name"):
        if kind == Rater.Kind.HUMAN:
            n += 1
            name = f"annotator_{n}"
        out[rid] = (kind, name)
    return out


_RECORD_FIELDS = [
    "id",
    "mas_name",
    "llm_name",
    "benchmark",
    "external_id",
    "content_hash",
    "metadata__mad_key",
    "metadata__mad_index",
]


class _Records:
    """What building a release's records keeps across chunks of traces: the release's modes on
    every version involved, the raters wanted, and label patterns built once and shared."""

    def __init__(self, *, spec: ReleaseSpec, stats: ReleaseStats, mapper: VersionMapper) -> None:
        self.spec, self.stats, self.mapper = spec, stats, mapper
        project, self.codes = spec.project, mapper.codes
        self.rater_names = _rater_names(project=project) if (spec.raters or spec.judge or spec.majority) else {}
        self.wanted_kinds: set[str] = set()
        if spec.raters or spec.majority:
            self.wanted_kinds |= {Rater.Kind.HUMAN}
        if spec.raters:
            self.wanted_kinds |= {Rater.Kind.IMPORTED}
        if spec.judge:
            self.wanted_kinds |= JUDGE_KINDS
        self.one_round = spec.round if spec.selection == "round" else None
        self.adjudications = agreed_adjudications(project=project, round=self.one_round)
        versions = {spec.version.pk} | agreed_versions(project=project, round=self.one_round)
        if self.wanted_kinds:
            versions |= set(
                _submitted_annotations(project=project)
                .order_by()
                .values_list("taxonomy_version_id", flat=True)
                .distinct()
            )
        self.modes = versions_mode_codes(version_ids=versions)
        self.codes_of = {vid: [c for _m, c in ms] for vid, ms in self.modes.items()}
        # raters' own labels are mapped by a mapper of their own: ``mapper``'s counts are the agreed labels'
        self.rater_mapper = VersionMapper(mapper.target, codes=self.codes)
        self.rater_values: dict[tuple[int, int, int], dict[str, int | None]] = {}
        # per-trace agreed labels and bases depend only on the trace's five masks: built once per pattern
        self.agreed_patterns: dict[tuple[int, ...], tuple[dict[str, int | None], dict[str, str]]] = {}

    def agreed(self, ids: list[int], chunk_ids: set[int]) -> Any:
        """The chunk's agreed labels, folded per (trace, round) in SQL; the latest closed round wins per mode."""
        adj_rows = [
            row
            for row in agreed_label_masks(
                # a range: no 5,000 bound parameters
                adjudications=self.adjudications.filter(trace_id__gte=ids[0], trace_id__lte=ids[-1]),
                modes=self.modes,
                bases=True,
            )
            if row[0] in chunk_ids
        ]
        self.stats.rounds.update(row[1] for row in adj_rows)
        return agreed_fold(adj_rows, modes=self.modes, mapper=self.mapper, bases=True)

    def rater_labels(self, ids: list[int], chunk_ids: set[int]) -> tuple[dict, dict]:
        """The chunk's wanted raters' own labels (folded per annotation in SQL, carried onto the
        release's version) by trace and rater, and their evidence and rationales where asked for."""
        per_rater: dict[int, dict[int, dict[str, int | None]]] = defaultdict(dict)
        extra: dict[int, dict[int, dict[str, tuple]]] = defaultdict(dict)
        if not self.wanted_kinds:
            return per_rater, extra
        scoped = _submitted_labels(project=self.spec.project).filter(
            annotation__trace_id__gte=ids[0],
            annotation__trace_id__lte=ids[-1],
            annotation__rater__kind__in=self.wanted_kinds,
        )
        label_rows = (
            scoped.values(
                "annotation_id", "annotation__trace_id", "annotation__rater_id", "annotation__taxonomy_version_id"
            )
            .annotate(
                p=mask_sum(self.modes, decision="present"),
                k=mask_sum(self.modes, decision__in=["present", "absent"]),
            )
            .order_by()
            .values_list(
                "annotation__trace_id",
                "annotation__rater_id",
                "annotation__taxonomy_version_id",
                "p",
                "k",
                "annotation_id",
            )
        )
        # Several annotations of one rater on a trace (other rounds or versions): the one on the
        # release's version wins, then the most recent (highest id).
        target_id = self.spec.version.pk
        for tid, rid, vid, p, k, _a in sorted(_raw_rows(label_rows), key=lambda r: (r[2] == target_id, r[5])):
            if tid in chunk_ids:
                per_rater[tid][rid] = self._rater_pattern(vid, int(p), int(k))
        if self.spec.evidence:
            # evidence as text: decoded only where there is some (most labels have none)
            ev_rows = (
                scoped.filter(annotation__taxonomy_version=self.spec.version)
                .exclude(Q(evidence=[]) & Q(rationale=""))
                .order_by("annotation_id")
                .values_list(
                    "annotation__trace_id",
                    "annotation__rater_id",
                    "mode__code",
                    Cast("evidence", TextField()),
                    "rationale",
                )
            )
            for tid, rid, code, ev_text, rationale in _raw_rows(ev_rows):
                if tid in chunk_ids:
                    extra[tid].setdefault(rid, {})[code] = (_decode_evidence(ev_text), rationale)
        return per_rater, extra

    def _rater_pattern(self, vid: int, p: int, k: int) -> dict[str, int | None]:
        """One dict per label pattern, in the release's code order, shared by every record with
        that pattern (records are serialised, never mutated)."""
        key = (vid, p, k)
        values = self.rater_values.get(key)
        if values is None:
            mapped = self.rater_mapper.map(vid, cast("dict[str, int | None]", unpack(p, k, self.codes_of[vid])))
            values = self.rater_values[key] = {c: mapped[c] for c in self.codes if c in mapped}
        return values

    def labels(self, tid: int, agreed: Any, humans: list[dict]) -> tuple[dict, dict, bool]:
        """A trace's final labels and each one's basis; where the release allows it, a majority of
        human raters decides what no round did (True when it did)."""
        known, present = agreed.known.get(tid, 0), agreed.present.get(tid, 0)
        pattern = (known, present, agreed.mapped.get(tid, 0), agreed.unanimous.get(tid, 0), agreed.majority.get(tid, 0))
        built = self.agreed_patterns.get(pattern)
        if built is None:
            built = self.agreed_patterns[pattern] = (
                {c: (present >> i) & 1 if (known >> i) & 1 else None for i, c in enumerate(self.codes)},
                {c: agreed.basis(tid, i) for i, c in enumerate(self.codes) if (known >> i) & 1},
            )
        labels, mode_basis = dict(built[0]), dict(built[1])  # copies: a majority vote fills them in
        used_majority = False
        if self.spec.majority:
            for c in self.codes:
                if labels[c] is None:
                    m = majority_vote([h[c] for h in humans if h.get(c) is not None], min_votes=2)
                    if m is not None:
                        labels[c] = m
                        mode_basis[c] = "majority_vote"
                        used_majority = True
                        self.stats.majority_labels += 1
        return labels, mode_basis, used_majority

    def humans(self, raters: dict[int, dict]) -> list[dict]:
        return [v for rid, v in raters.items() if self.rater_names.get(rid, ("",))[0] == "human"]

    def raters_out(self, studio: dict[str, Any], raters: dict[int, dict], extra: dict[int, dict]) -> None:
        """The wanted raters' and judges' own labels, evidence and rationales, by name, into ``studio``."""
        spec = self.spec
        if spec.raters or spec.judge:
            raters_out: dict[str, dict] = {}
            judge_out: dict[str, dict] = {}
            for rid, values in raters.items():
                kind, name = self.rater_names.get(rid, ("", f"rater_{rid}"))
                if kind in JUDGE_KINDS:
                    if spec.judge:
                        judge_out[name] = values
                elif spec.raters:
                    raters_out[name] = values
            if spec.raters:
                studio["raters"] = raters_out
            if spec.judge:
                studio["judge"] = judge_out
        if spec.evidence:
            ev: dict[str, dict] = {}
            ra: dict[str, dict] = {}
            for rid, per_code in extra.items():
                kind, name = self.rater_names.get(rid, ("", f"rater_{rid}"))
                if (kind in JUDGE_KINDS and not spec.judge) or (kind not in JUDGE_KINDS and not spec.raters):
                    continue
                for c, (evidence, rationale) in per_code.items():
                    if evidence:
                        ev.setdefault(name, {})[c] = evidence
                    if rationale:
                        ra.setdefault(name, {})[c] = rationale
            studio["evidence"] = ev
            studio["rationales"] = ra

    def count(self, t: dict[str, Any], labels: dict[str, int | None], has_consensus: bool) -> None:
        """The release's counts (for its card and manifest) with one more record."""
        stats = self.stats
        stats.traces += 1
        if has_consensus:
            stats.consensus_traces += 1
        else:
            stats.majority_traces += 1
        stats.by_mas_name[t["mas_name"]] += 1
        stats.by_llm_name[t["llm_name"]] += 1
        stats.by_benchmark_name[t["benchmark"]] += 1
        for c, v in labels.items():
            if v == 1:
                stats.present[c] += 1


def release_records(
    *, spec: ReleaseSpec, stats: ReleaseStats, mapper: VersionMapper, progress: Callable[[int], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield one MAST-Data-shaped record per trace of the release, in trace id order."""
    # The blind rule per chunk (the traces of draft and open rounds in its id range, left out here):
    # the selection with release_traces' exclusion in SQL re-read the open rounds' traces for every
    # chunk (an anti-join from their first trace: ~0.3 s a chunk, a minute at 1,000,000 traces).
    traces = _selected_traces(
        project=spec.project, selection=spec.selection, round=spec.round, filters=spec.filters, majority=spec.majority
    )
    blind_rows = open_round_traces(project=spec.project)
    # with the text, raw text is fetched in byte-bounded batches, not with the chunk
    fields = [*_RECORD_FIELDS, "size_bytes"] if spec.trace_text else _RECORD_FIELDS
    r = _Records(spec=spec, stats=stats, mapper=mapper)
    done = last_id = 0
    while chunk := list(traces.filter(id__gt=last_id).order_by("id").values(*fields)[:CHUNK]):
        first_id, last_id = chunk[0]["id"], chunk[-1]["id"]
        blind = set(blind_rows.filter(trace_id__gte=first_id, trace_id__lte=last_id).values_list("trace_id", flat=True))
        if blind:
            chunk = [t for t in chunk if t["id"] not in blind]
            if not chunk:
                continue
        ids = [t["id"] for t in chunk]
        chunk_ids = set(ids)
        agreed = r.agreed(ids, chunk_ids)
        per_rater, extra = r.rater_labels(ids, chunk_ids)
        attributions = attribution_export(agreed_attributions(project=spec.project, trace_ids=ids, round=r.one_round))
        texts: dict[int, str] = {}
        for position, t in enumerate(chunk):
            if spec.trace_text and t["id"] not in texts:
                texts = _texts_from(chunk, position)
            if progress is not None and position and position % PROGRESS_EVERY == 0:
                progress(done + position)  # the page's progress bar moves within a chunk too
            tid = t["id"]
            raters = per_rater.get(tid, {})
            labels, mode_basis, used_majority = r.labels(tid, agreed, r.humans(raters) if spec.majority else [])
            if all(v is None for v in labels.values()):
                stats.skipped_no_labels += 1
                continue
            has_consensus = any(b != "majority_vote" for b in mode_basis.values())
            studio: dict[str, Any] = {
                "trace_pk": tid,
                "content_hash": t["content_hash"],
                "final_source": "consensus" if not used_majority else ("mixed" if has_consensus else "majority_vote"),
                "final_basis": mode_basis,
                "attribution": attributions.get(tid),
            }
            if spec.number is not None:  # where the labels come from, when the file is imported again
                studio["release"] = {"project": spec.project.slug, "number": spec.number}
            r.raters_out(studio, raters, extra.get(tid, {}))
            r.count(t, labels, has_consensus)
            yield {
                "mas_name": t["mas_name"],
                "llm_name": t["llm_name"],
                "benchmark_name": t["benchmark"],
                "trace_id": t["external_id"],  # always the source's own id ("" when it had none)
                "studio_trace_id": tid,  # the database id, in its own column
                "trace": {
                    "key": t["metadata__mad_key"] or "",
                    "index": t["metadata__mad_index"],
                    "trajectory": texts[tid] if spec.trace_text else None,
                },
                "mast_annotation": labels,
                "mast_studio": studio,
            }
        done += len(chunk)
        if progress is not None:
            progress(done)


def _texts_from(chunk: list[dict], start: int) -> dict[int, str]:
    """Raw texts of chunk[start:] up to TEXT_BATCH_BYTES (at least one trace): memory stays bounded
    however long the traces are."""
    ids: list[int] = []
    total = 0
    for t in chunk[start:]:
        if ids and total + t["size_bytes"] > TEXT_BATCH_BYTES:
            break
        ids.append(t["id"])
        total += t["size_bytes"]
    return dict(Trace.objects.filter(id__in=ids).values_list("id", "raw_text"))
