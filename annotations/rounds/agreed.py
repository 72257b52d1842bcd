"""The project's agreed labels, its ground truth: the consensus (Adjudication rows) of its CLOSED rounds.

One definition that every reader builds on (the agreed-labels API, judge quality, the analytics
dashboard, dataset releases):

* Which rounds: the project's closed rounds (``agreed_adjudications``), optionally one round or one
  taxonomy version. Rounds in progress never count.
* Which wins: per (trace, mode), the most recently closed round (closing time, then round id).
* Basis: ``unanimous``, ``adjudicated`` or ``majority`` (the round was closed with a vote), as the
  round recorded it; a unit a closed round left without consensus (an imported tie) has no label.

Readers differ in shape, not in meaning, so the differences are parameters:

* ``agreed_labels``: one row per (trace, taxonomy version, mode), in each round's own codes (no
  mapping across versions); small and exact, for the API and judge quality.
* ``agreed_label_masks`` + ``agreed_fold``: the same labels folded per (trace, round) into bit masks
  in SQL (``mask_sum``), then carried to one target version (``taxonomy.mapping.VersionMapper``)
  with later rounds overriding earlier ones per mode; for 10,000-trace dashboards and releases.
  ``bases=True`` also keeps each label's basis (and "mapped" where the code came from the mapping).
* ``agreed_mask_arrays`` + ``agreed_fold_arrays``: the same fold for the dashboard, vectorised:
  the per-(round, trace) masks come from ``AgreedMask`` rows (kept by triggers, migration 0012),
  and the mapping runs per version over numpy arrays
  (``VersionMapper.map_masks``): same labels, same per-version counts as ``agreed_fold``.
* ``agreed_labels_on_version``: the agreed labels of the project (or of one round) carried onto
  one target version (default: the project's working version), with the mapping's per-version
  counts; THE function for "the agreed labels on version X" (judge quality calls it).
* ``majority_vote``: the strict-majority rule, shared by rounds (closing with a vote) and releases
  (filling units without consensus from raters' labels, with at least two voters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.contrib.postgres.aggregates import StringAgg
from django.db.models import BigIntegerField, Case, Q, QuerySet, Sum, TextField, Value, When
from django.db.models.functions import Cast

from annotations.models import Adjudication, AgreedMask, LabelsStamp, Round
from taxonomy.mapping import VersionMapper
from taxonomy.models import FailureMode, TaxonomyVersion
from taxonomy.selectors import versions_mode_codes
from traces.models import Project

ModeCodes = dict[int, list[tuple[int, str]]]  # version id -> [(mode id, code)]; position = bit


def agreed_adjudications(
    *,
    project: Project,
    round: Round | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
    trace_ids: Iterable[int] | None = None,
) -> QuerySet[Adjudication]:
    """The Adjudication rows behind the agreed labels: those of the project's closed rounds (as
    they are when called). The rounds are looked up first and passed as a list of ids, not joined:
    with the join, a plan read every adjudication of the project by round to keep one chunk of
    traces (1.5 s a chunk of 5,000 at 14 M adjudications; the rounds' statistics lag behind a new
    round); by the list, (round, trace) on the unique index reads only the chunk's rows."""
    rounds = Round.objects.filter(project=project, state=Round.State.CLOSED)
    if round is not None:
        rounds = rounds.filter(pk=round.pk)
    if taxonomy_version is not None:
        rounds = rounds.filter(taxonomy_version=taxonomy_version)
    qs = Adjudication.objects.filter(round_id__in=list(rounds.values_list("pk", flat=True)))
    if trace_ids is not None:
        qs = qs.filter(trace_id__in=list(trace_ids))
    return qs


def agreed_labels_stamp(*, project: Project) -> int:
    """A number that differs after any write to the project's adjudications or rounds (closing,
    reopening, a decision, an import, a deletion): database triggers bump it (``LabelsStamp``).
    Key caches of agreed-label figures on it (with the traces and the mappings they also read)."""
    return LabelsStamp.objects.filter(project_id=project.pk).values_list("version", flat=True).first() or 0


def agreed_versions(*, project: Project, round: Round | None = None) -> set[int]:
    """Taxonomy versions the agreed labels may come in (those of the closed rounds): read from the
    few round rows, not the many adjudications."""
    rounds = Round.objects.filter(project=project, state=Round.State.CLOSED)
    if round is not None:
        rounds = rounds.filter(pk=round.pk)
    return set(rounds.values_list("taxonomy_version_id", flat=True))


@dataclass(frozen=True)
class AgreedLabel:
    trace_id: int
    mode_code: str
    mode_id: int
    taxonomy_version_id: int
    decision: str  # "present" | "absent"
    basis: str  # "unanimous" | "adjudicated" | "majority"
    round_id: int
    note: str


def agreed_labels(
    *,
    project: Project,
    taxonomy_version: TaxonomyVersion | None = None,
    trace_ids: Iterable[int] | None = None,
) -> list[AgreedLabel]:
    """The project's agreed labels, one row per (trace, taxonomy version, mode code).

    When a trace was in several closed rounds with the same taxonomy version, the most recently
    closed round wins. Filter by ``taxonomy_version`` to get labels in one version's codes (carrying
    labels across versions is ``agreed_fold``'s business). Ordered by trace id, then mode order.
    """
    qs = agreed_adjudications(project=project, taxonomy_version=taxonomy_version, trace_ids=trace_ids)
    rows = qs.order_by("trace_id", "mode__order", "mode__code", "-round__closed_at", "-round_id").values_list(
        "trace_id", "mode__code", "mode_id", "round__taxonomy_version_id", "decision", "basis", "round_id", "note"
    )
    out: list[AgreedLabel] = []
    seen: set[tuple[int, int, str]] = set()
    for trace_id, code, mode_id, version_id, decision, basis, round_id, note in rows:
        key = (trace_id, version_id, code)
        if key in seen:
            continue
        seen.add(key)
        out.append(AgreedLabel(trace_id, code, mode_id, version_id, decision, basis, round_id, note))
    return out


# ------------------------------------------------------------------ labels folded into bit masks


def mask_sum(modes: ModeCodes, **conditions) -> Sum:
    """SUM(CASE WHEN <conditions> THEN CASE WHEN mode_id = m THEN 2^bit ... END END): one integer per
    group holding a bit per mode, so labels fold into a few small rows in the database (one label
    per mode and group). The condition is tested once per row, outside the per-mode CASE.
    Also used for raters' labels (ModeLabel rows have the same mode_id and decision columns)."""
    bit = Case(
        *[When(mode_id=mid, then=Value(1 << i)) for ms in modes.values() for i, (mid, _code) in enumerate(ms)],
        default=Value(0),
        output_field=BigIntegerField(),
    )
    if conditions:
        bit = Case(When(Q(**conditions), then=bit), default=Value(0), output_field=BigIntegerField())
    return Sum(bit)


def unpack(mask_present: int, mask_known: int, codes: list[str]) -> dict[str, int]:
    return {c: (mask_present >> i) & 1 for i, c in enumerate(codes) if (mask_known >> i) & 1}


def agreed_label_masks(*, adjudications: QuerySet[Adjudication], modes: ModeCodes, bases: bool = False) -> list[tuple]:
    """``(trace_id, round_id, version_id, present, known[, unanimous, majority])`` per (trace, round)
    of ``adjudications`` (an ``agreed_adjudications`` queryset, narrowed as the caller needs), bits
    over ``modes[version_id]``, earliest closed round first so that a fold lets later ones win."""
    sums = {"p": mask_sum(modes, decision="present"), "k": mask_sum(modes)}  # decisions are never unsure
    if bases:
        sums |= {"u": mask_sum(modes, basis="unanimous"), "m": mask_sum(modes, basis="majority")}
    rows = list(
        adjudications.values("trace_id", "round_id")
        .annotate(**sums)
        .order_by()
        .values_list("trace_id", "round_id", *sums)
    )
    # Each round's version and closing order come from the few round rows, not from a join and a
    # MAX(closed_at) per group (decoding 100,000 timestamps cost more than the aggregate).
    # Ordered here, not in SQL: an ORDER BY before the GROUP BY would sort every label row.
    # A closed round without a closing time sorts last, as NULLS LAST would.
    rounds = Round.objects.filter(pk__in={r[1] for r in rows}).values_list("pk", "taxonomy_version_id", "closed_at")
    ordered = sorted(rounds, key=lambda r: (r[2] is None, r[2], r[0]))
    rank = {pk: i for i, (pk, _v, _at) in enumerate(ordered)}
    version = {pk: vid for pk, vid, _at in ordered}
    rows.sort(key=lambda r: rank[r[1]])  # stable: within a round, the database's order
    return [(r[0], r[1], version[r[1]], *r[2:]) for r in rows]


@dataclass
class AgreedMasks:
    """Per trace id, bit masks over the target version's codes (``VersionMapper.codes``)."""

    present: dict[int, int] = field(default_factory=dict)
    known: dict[int, int] = field(default_factory=dict)
    # with bases: which known bits were unanimous / majority / carried from another version's code
    unanimous: dict[int, int] = field(default_factory=dict)
    majority: dict[int, int] = field(default_factory=dict)
    mapped: dict[int, int] = field(default_factory=dict)
    # with bases: which known bits a round of another version decided (carried through a mapping)
    foreign: dict[int, int] = field(default_factory=dict)

    def basis(self, trace_id: int, bit: int) -> str:
        b = 1 << bit
        if self.mapped.get(trace_id, 0) & b:
            return "mapped"
        if self.unanimous.get(trace_id, 0) & b:
            return "unanimous"
        if self.majority.get(trace_id, 0) & b:
            return "majority"
        return "adjudicated"


def agreed_fold(rows: Iterable[tuple], *, modes: ModeCodes, mapper: VersionMapper, bases: bool = False) -> AgreedMasks:
    """Fold ``agreed_label_masks`` rows (in their order) into per-trace masks in the target version:
    labels of other versions go through ``mapper``; a later round overrides what it decides.
    Raters' labels folded per annotation into rows of the same shape fold the same way."""
    out = AgreedMasks()
    target = mapper.target.pk
    bit_of = {c: i for i, c in enumerate(mapper.codes)}
    codes_of = {vid: [c for _m, c in ms] for vid, ms in modes.items()}
    same_bits = codes_of.get(target) == mapper.codes
    # without bases a row's result depends only on (version, present, known): map each pattern once
    seen: dict[tuple[int, int, int], tuple[int, int, tuple]] = {}
    for row in rows:
        tid, _rid, vid, p, k = row[:5]
        p, k = int(p or 0), int(k or 0)
        u, m = (int(row[5] or 0), int(row[6] or 0)) if bases else (0, 0)
        carried = 0
        hit = None if bases else seen.get((vid, p, k))
        if hit is not None:
            p, k, delta = hit
            mapper.replay(vid, delta)
        elif vid == target and same_bits:
            mapper.note_target(bin(k).count("1"))
        else:
            key, before = (vid, p, k), mapper.snapshot(vid)
            src = codes_of[vid]
            src_bit = {c: i for i, c in enumerate(src)}
            values = unpack(p, k, src)
            p = k = pu = pm = 0
            for c, v in mapper.map(vid, values).items():
                if v is None or c not in bit_of:
                    continue
                b = 1 << bit_of[c]
                k |= b
                p |= v * b
                i = src_bit.get(c)
                if i is None:
                    carried |= b
                elif (u >> i) & 1:
                    pu |= b
                elif (m >> i) & 1:
                    pm |= b
            u, m = pu, pm
            if not bases:
                seen[key] = (p, k, mapper.delta(vid, before))
        out.present[tid] = (out.present.get(tid, 0) & ~k) | p
        out.known[tid] = out.known.get(tid, 0) | k
        if bases:
            out.unanimous[tid] = (out.unanimous.get(tid, 0) & ~k) | u
            out.majority[tid] = (out.majority.get(tid, 0) & ~k) | m
            out.mapped[tid] = (out.mapped.get(tid, 0) & ~k) | carried
            out.foreign[tid] = (out.foreign.get(tid, 0) & ~k) | (k if vid != target else 0)
    return out


# ------------------------------------------------------------------ the same fold over arrays


def agreed_mask_layout(*, version_ids: Iterable[int]) -> dict[int, list[str]]:
    """version id -> its mode codes in id order: bit i of an ``AgreedMask`` mask is the i-th."""

    out: dict[int, list[str]] = {v: [] for v in version_ids}
    for vid, code in (
        FailureMode.objects.filter(version_id__in=out).order_by("version_id", "id").values_list("version_id", "code")
    ):
        out[vid].append(code)
    return out


@dataclass
class MaskArrays:
    """Label masks per row, rows in override order (a later row wins per mode of its trace):
    ``layouts[version_ids[r]][i]`` is the code of bit i of row r."""

    trace_ids: np.ndarray  # int64
    version_ids: np.ndarray  # int64
    known: np.ndarray  # uint64
    present: np.ndarray  # uint64
    layouts: dict[int, list[str]]

    @classmethod
    def from_rows(cls, rows: Sequence[tuple], layouts: dict[int, list[str]]) -> MaskArrays:
        """From ``(trace_id, _, version_id, present, known, ...)`` rows (``agreed_label_masks``)."""
        a = np.array([r[:5] for r in rows], dtype=np.int64).reshape(-1, 5)
        return cls(a[:, 0], a[:, 2], a[:, 4].astype(np.uint64), a[:, 3].astype(np.uint64), layouts)


def agreed_mask_arrays(
    *, project: Project, trace_ids: QuerySet | None = None, extra_versions: Iterable[int] = ()
) -> MaskArrays:
    """The per-(round, trace) masks of the project's closed rounds (optionally of traces in the
    ``trace_ids`` subquery), earliest closed round first (the order ``agreed_label_masks`` gives).
    From ``AgreedMask`` rows, which triggers keep (migration 0012)."""
    rounds = Round.objects.filter(project=project, state=Round.State.CLOSED).values_list(
        "pk", "taxonomy_version_id", "closed_at"
    )
    ordered = sorted(rounds, key=lambda r: (r[2] is None, r[2], r[0]))
    versions = {vid for _pk, vid, _at in ordered} | set(extra_versions)
    layouts = agreed_mask_layout(version_ids=versions)
    if not ordered:
        empty = np.zeros(0, dtype=np.int64)
        return MaskArrays(empty, empty, empty.astype(np.uint64), empty.astype(np.uint64), layouts)
    qs = AgreedMask.objects.filter(round_id__in=[pk for pk, _v, _at in ordered])
    if trace_ids is not None:
        qs = qs.filter(trace_id__in=trace_ids)
    # one row of four comma-separated strings (``string_agg``): at 100,000 rows a fraction of the
    # database time of ``array_agg`` and of the CPU of 100,000 row tuples; aggregates of one
    # query see the rows in one order, so the columns line up
    fields = ("round_id", "trace_id", "known", "present")
    cols = qs.order_by().aggregate(**{f: StringAgg(Cast(f, TextField()), delimiter=",") for f in fields})
    a = np.array([np.fromstring(cols[f] or "", dtype=np.int64, sep=",") for f in fields]).T.reshape(-1, 4)
    # per row: its round's closing rank and version, looked up in arrays sorted by round id
    by_pk = sorted((pk, i, vid) for i, (pk, vid, _at) in enumerate(ordered))
    pks = np.array([r[0] for r in by_pk], dtype=np.int64)
    at = np.searchsorted(pks, a[:, 0])
    rank = np.array([r[1] for r in by_pk], dtype=np.int64)[at]
    a = a[np.argsort(rank, kind="stable")]
    vids = np.array([r[2] for r in by_pk], dtype=np.int64)[np.searchsorted(pks, a[:, 0])]
    return MaskArrays(a[:, 1], vids, a[:, 2].astype(np.uint64), a[:, 3].astype(np.uint64), layouts)


@dataclass
class FoldedArrays:
    """Per trace (``trace_ids``, sorted), masks over ``VersionMapper.codes`` (uint64)."""

    trace_ids: np.ndarray
    known: np.ndarray
    present: np.ndarray


def agreed_fold_arrays(masks: MaskArrays, *, mapper: VersionMapper) -> FoldedArrays:
    """``agreed_fold`` (without bases) over arrays: each version's rows mapped at once, then the
    rows folded in their order, a later row overriding the modes it decides. Same masks and the
    same mapper counts as ``agreed_fold`` over the same rows (tested against it)."""
    n = len(masks.trace_ids)
    k_t = np.zeros(n, dtype=np.uint64)
    p_t = np.zeros(n, dtype=np.uint64)
    for vid in sorted(set(masks.version_ids.tolist())):
        sel = masks.version_ids == vid
        k_t[sel], p_t[sel] = mapper.map_masks(vid, masks.layouts[vid], masks.known[sel], masks.present[sel])
    uids, inverse = np.unique(masks.trace_ids, return_inverse=True)
    known = np.zeros(len(uids), dtype=np.uint64)
    present = np.zeros(len(uids), dtype=np.uint64)
    if n:
        # the k-th row of each trace (in row order) goes in layer k; a layer has each trace once
        by_trace = np.argsort(inverse, kind="stable")
        starts = np.searchsorted(inverse[by_trace], inverse[by_trace], side="left")
        layer = np.empty(n, dtype=np.int64)
        layer[by_trace] = np.arange(n) - starts
        for k in range(int(layer.max()) + 1):
            sel = layer == k
            idx = inverse[sel]
            present[idx] = (present[idx] & ~k_t[sel]) | p_t[sel]
            known[idx] |= k_t[sel]
    return FoldedArrays(uids, known, present)


@dataclass
class AgreedOnVersion:
    """The agreed labels carried onto ``target`` (``agreed_labels_on_version``).

    ``labels``: trace id -> {target code: 1 present | 0 absent}, decided values only; ``unknown``:
    trace id -> target codes a label reached but the mapping could not decide (a split mode);
    ``mapping``: ``VersionMapper.summary()`` rows, one per source version (labels read, mapped,
    unknown, dropped, no path)."""

    target: TaxonomyVersion
    codes: list[str]
    labels: dict[int, dict[str, int]]
    basis: dict[int, dict[str, str]]
    unknown: dict[int, list[str]]
    mapping: list[dict]
    via_mapping: int = 0  # labels a round of another version decided (carried through a mapping)

    @property
    def n_unknown(self) -> int:
        return sum(len(v) for v in self.unknown.values())


def agreed_labels_on_version(
    *,
    project: Project,
    target: TaxonomyVersion | None = None,
    round: Round | None = None,
    trace_ids: Iterable[int] | None = None,
) -> AgreedOnVersion:
    """The project's agreed labels (or one closed round's consensus) on ``target`` (default: the
    working version), labels of every other version carried through the recorded mappings.

    For judge quality: ``agreed_labels_on_version(project=p, target=run.taxonomy_version,
    round=r)`` gives the consensus of round ``r`` in the run's codes, whatever version ``r`` used.
    A unit the mapping cannot decide is in ``unknown``, never silently absent."""

    target = target or project.taxonomy_version
    adjudications = agreed_adjudications(project=project, round=round, trace_ids=trace_ids)
    modes = versions_mode_codes(version_ids=agreed_versions(project=project, round=round) | {target.pk})
    mapper = VersionMapper(target, codes=[c for _m, c in modes[target.pk]])
    rows = agreed_label_masks(adjudications=adjudications, modes=modes, bases=True)
    folded = agreed_fold(rows, modes=modes, mapper=mapper, bases=True)
    # units a label reached but could not decide: the target codes reachable from a known code
    reached_unknown: dict[int, set[str]] = {}
    codes_of = {vid: [c for _m, c in ms] for vid, ms in modes.items()}
    for tid, _rid, vid, p, k in (r[:5] for r in rows):
        if vid == target.pk:
            continue
        values = unpack(int(p or 0), int(k or 0), codes_of[vid])
        out = mapper.map_quiet(vid, values)
        reached = mapper.reached(vid)
        for code in values:
            for t in reached.get(code, ()):
                if out.get(t) is None:
                    reached_unknown.setdefault(tid, set()).add(t)
    labels: dict[int, dict[str, int]] = {}
    basis: dict[int, dict[str, str]] = {}
    unknown: dict[int, list[str]] = {}
    for tid, known in folded.known.items():
        present = folded.present.get(tid, 0)
        labels[tid] = {c: (present >> i) & 1 for i, c in enumerate(mapper.codes) if (known >> i) & 1}
        basis[tid] = {c: folded.basis(tid, i) for i, c in enumerate(mapper.codes) if (known >> i) & 1}
    for tid, codes in reached_unknown.items():
        left = sorted(c for c in codes if c not in labels.get(tid, {}))
        if left:
            unknown[tid] = left
    via_mapping = sum(bin(folded.foreign.get(t, 0) & k).count("1") for t, k in folded.known.items())
    return AgreedOnVersion(
        target=target,
        codes=mapper.codes,
        labels=labels,
        basis=basis,
        unknown=unknown,
        mapping=mapper.summary(),
        via_mapping=via_mapping,
    )


def majority_vote(votes: Sequence[int], *, min_votes: int = 1) -> int | None:
    """Strict majority of 1 (present) / 0 (absent) votes; None on a tie or with fewer than ``min_votes``."""
    if len(votes) < min_votes:
        return None
    yes = sum(votes)
    no = len(votes) - yes
    return 1 if yes > no else 0 if no > yes else None
