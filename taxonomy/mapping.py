"""Carrying labels across taxonomy versions through the recorded mappings.

The versions form a graph. Its edges are

* a drafted version and its parent: the ``ModeMapping`` rows drafting recorded (parent -> child);
* any two versions a ``CrossMapping`` pair links (an imported version matched onto an existing
  one, or a manager's mapping on the mapping page). Cross rows for a (parent, child) pair replace
  the drafted rows of that pair: published drafted rows are frozen, corrections live there.

A label of any version reaches the target along the shortest path of edges (``mapping_path``,
fewest steps; forward edges preferred on ties). An edge walked backwards is inverted
(``invert_step``): a rename stays a rename, a split read backwards is a merge, a merge read
backwards is a split, an added mode is a removed one and the reverse. So v1 -> v2 -> v3 chains,
v3 labels reach v1, and an imported version reaches MAST v1 through its matched mapping.

``map_codes`` is the pure rule for one step; ``VersionMapper`` walks the path for any source
version and counts, per source version, what it carried (``by_version``): labels read, labels
that reached a target mode with a decided value (``mapped``), labels whose target value the
mapping cannot decide (``unknown``: a split mode's "present"), labels whose mode has no target
(``dropped``: a removed mode, or a mode nothing maps), and all labels of a version with no path
(``no_path``). Pages and exports show these counts; nothing is dropped silently.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass

import numpy as np
from django.db import connection

from taxonomy.models import CrossMapping, ModeMapping, TaxonomyVersion
from taxonomy.selectors import version_modes

Step = list[tuple[str, str, str]]  # (old_code, new_code, kind) edges of one version step
K = ModeMapping.Kind
INVERSE_KIND = {K.SPLIT: K.MERGE, K.MERGE: K.SPLIT, K.ADD: K.REMOVE, K.REMOVE: K.ADD}


def invert_step(step: Step) -> Step:
    """The same step read from the new version back to the old one (pure)."""
    return [(new, old, str(INVERSE_KIND.get(kind, kind))) for old, new, kind in step]


def version_graph() -> dict[int, list[tuple[int, str, int]]]:
    """version id -> [(neighbour id, "drafted"|"cross", direction +1 forward / -1 backward)].

    Two small queries (version rows and distinct cross pairs), whatever the number of labels."""
    graph: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    cross = set(CrossMapping.objects.order_by().values_list("source_id", "target_id").distinct())
    for vid, parent in TaxonomyVersion.objects.exclude(parent=None).values_list("id", "parent_id"):
        if (parent, vid) in cross:
            continue
        graph[parent].append((vid, "drafted", 1))
        graph[vid].append((parent, "drafted", -1))
    for s, t in sorted(cross):
        graph[s].append((t, "cross", 1))
        graph[t].append((s, "cross", -1))
    for vid in graph:
        graph[vid].sort(key=lambda e: (-e[2], e[0]))  # forward edges first: ties prefer them
    return graph


def mappings_fingerprint() -> tuple:
    """Changes whenever a mapping a reader may follow changes (for caches of mapped labels); one query."""

    cross, drafted, versions = (m._meta.db_table for m in (CrossMapping, ModeMapping, TaxonomyVersion))
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*), MAX(updated_at), (SELECT COUNT(*) FROM {drafted}), "  # noqa: S608 - table names
            f"(SELECT COUNT(*) FROM {versions}) FROM {cross}"
        )
        return tuple(str(v) for v in cur.fetchone())


def mapping_path(
    *, source_id: int, target_id: int, graph: dict[int, list[tuple[int, str, int]]] | None = None
) -> list[tuple[int, int, str, int]] | None:
    """The edges (from, to, how, direction) from ``source_id`` to ``target_id``; [] for the same
    version, None when no recorded mapping connects them."""
    if source_id == target_id:
        return []
    graph = version_graph() if graph is None else graph
    prev: dict[int, tuple[int, str, int]] = {source_id: (source_id, "", 0)}
    queue = deque([source_id])
    while queue:
        v = queue.popleft()
        if v == target_id:
            break
        for n, how, d in graph.get(v, ()):
            if n not in prev:
                prev[n] = (v, how, d)
                queue.append(n)
    if target_id not in prev:
        return None
    path = []
    v = target_id
    while v != source_id:
        u, how, d = prev[v]
        path.append((u, v, how, d))
        v = u
    return list(reversed(path))


def _edge_rows(edges: list[tuple[int, int, str, int]]) -> dict[tuple[int, int], Step]:
    """Rows of each edge as (old, new, kind) from the edge's forward source to its forward target."""
    drafted = {(u, v) if d > 0 else (v, u) for u, v, how, d in edges if how == "drafted"}
    cross = {(u, v) if d > 0 else (v, u) for u, v, how, d in edges if how == "cross"}
    rows: dict[tuple[int, int], Step] = {pair: [] for pair in drafted | cross}
    if drafted:
        children = {c: p for p, c in drafted}
        for vid, old, new, kind in ModeMapping.objects.filter(version_id__in=children).values_list(
            "version_id", "old_code", "new_code", "kind"
        ):
            rows[(children[vid], vid)].append((old, new, kind))
    if cross:
        sources = {s for s, _ in cross}
        for s, t, old, new, kind in CrossMapping.objects.filter(source_id__in=sources).values_list(
            "source_id", "target_id", "old_code", "new_code", "kind"
        ):
            if (s, t) in rows and (s, t) in cross:
                rows[(s, t)].append((old, new, kind))
    return rows


def mapping_steps(*, source_id: int, target: TaxonomyVersion, graph=None) -> list[Step] | None:
    """The chain of mapping steps from version ``source_id`` to ``target`` (see ``mapping_path``);
    [] for the same version, None when nothing connects them (labels of that version cannot be carried)."""
    path = mapping_path(source_id=source_id, target_id=target.pk, graph=graph)
    if path is None:
        return None
    rows = _edge_rows(path)
    steps = []
    for u, v, _how, d in path:
        steps.append(rows[(u, v)] if d > 0 else invert_step(rows[(v, u)]))
    return steps


def map_codes(values: dict[str, int | None], steps: list[Step]) -> dict[str, int | None]:
    """Carry {code: 1|0|None} through mapping steps (pure).

    same/edit/rename copy the value; a merge is present when any merged mode was present, absent
    when all known were absent, unknown otherwise; a split copies "absent" to every part and
    makes "present" unknown (which part is not recorded); removed modes drop out; added modes
    are unknown.
    """
    for step in steps:
        parts: dict[str, list[int | None]] = defaultdict(list)
        for old, new, kind in step:
            if not new:
                continue
            if not old:
                parts[new].append(None)
                continue
            if old not in values:
                continue
            v = values[old]
            if kind == K.SPLIT and v == 1:
                v = None
            parts[new].append(v)
        out: dict[str, int | None] = {}
        for new, vs in parts.items():
            if 1 in vs:
                out[new] = 1
            elif vs and all(v == 0 for v in vs):
                out[new] = 0
            else:
                out[new] = None
        values = out
    return values


MAX_BITS = 64


def _bit(i: int) -> np.uint64:
    if i >= MAX_BITS:
        raise ValueError(f"a label mask holds at most {MAX_BITS} modes; this mapping step has more")
    return np.uint64(1 << i)


def popcount(a: np.ndarray) -> int:
    """Set bits over a whole uint64 array."""
    return int(np.bitwise_count(a).sum()) if len(a) else 0


def map_masks(
    codes: list[str], known: np.ndarray, present: np.ndarray, steps: list[Step]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``map_codes`` for many label patterns at once (pure): bit i of ``known``/``present``
    (uint64 arrays, one element per pattern) is ``codes[i]``; returns the last step's codes and
    the decided / present masks over them. Same rules as ``map_codes``, per new code: present when
    a non-split contributor is present; absent when it has contributors with a value, no added
    mode, and all of them are known absent; otherwise (a value reached it) unknown. Between steps
    a third mask (``has``) tracks codes that got a value, unknown included."""
    has, known, present = known.copy(), known.copy(), present.copy()
    cur = list(codes)
    zero = np.uint64(0)
    for step in steps:
        pos = {c: i for i, c in enumerate(cur)}
        contrib: dict[str, list] = {}  # new code -> [mask of contributors, non-split ones, has an added mode]
        for old, new, kind in step:
            if not new:
                continue
            entry = contrib.setdefault(new, [0, 0, False])
            if not old:
                entry[2] = True
                continue
            i = pos.get(old)
            if i is None:
                continue
            entry[0] |= 1 << i
            if kind != K.SPLIT:
                entry[1] |= 1 << i
        absent = known & ~present
        n_has, n_known, n_present = (np.zeros_like(known) for _ in range(3))
        for j, (all_m, ns_m, added) in enumerate(contrib.values()):
            b, all_m, ns_m = _bit(j), np.uint64(all_m), np.uint64(ns_m)
            reached = has & all_m
            any1 = (present & ns_m) != zero
            got = np.ones(len(has), dtype=bool) if added else reached != zero
            all0 = np.zeros(len(has), dtype=bool) if added else (reached != zero) & ((absent & all_m) == reached)
            n_has |= np.where(got, b, zero)
            n_present |= np.where(any1, b, zero)
            n_known |= np.where(any1 | all0, b, zero)
        has, known, present, cur = n_has, n_known, n_present, list(contrib)
    return cur, known, present


def reach(steps: list[Step]) -> dict[str, set[str]]:
    """source code -> the target codes it reaches through ``steps`` (pure); codes of the first
    step's old side that reach nothing map to an empty set."""
    out: dict[str, set[str]] = {}
    firsts = {old for old, _n, _k in (steps[0] if steps else []) if old}
    for code in firsts:
        cur = {code}
        for step in steps:
            cur = {new for old, new, _k in step if old in cur and new}
        out[code] = cur
    return out


@dataclass
class SourceCounts:
    """What a mapper carried from one source version (see the module doc)."""

    labels: int = 0
    mapped: int = 0
    unknown: int = 0
    dropped: int = 0
    no_path: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "labels": self.labels,
            "mapped": self.mapped,
            "unknown": self.unknown,
            "dropped": self.dropped,
            "no_path": self.no_path,
        }


class VersionMapper:
    """Maps {code: value} of any source version to the target version, caching paths and results.

    ``mapped``/``unmappable``/``kinds``/``sources`` are the totals releases record; ``by_version``
    has the per-source counts pages show. Results are memoised per (version, values), so folding
    10,000 traces costs one mapping per distinct label pattern."""

    def __init__(self, target: TaxonomyVersion, codes: list[str] | None = None) -> None:
        self.target = target
        self.codes = codes if codes is not None else [m.code for m in version_modes(version=target)]
        self._steps: dict[int, list[Step] | None] = {target.pk: []}
        self._reach: dict[int, dict[str, set[str]]] = {}
        self._memo: dict[tuple, tuple[dict[str, int | None], tuple[int, int, int, tuple]]] = {}
        self._graph = None
        self.mapped = 0
        self.unmappable = 0
        self.kinds: Counter[str] = Counter()
        self.sources: set[int] = set()
        self.by_version: dict[int, SourceCounts] = defaultdict(SourceCounts)

    def steps(self, version_id: int) -> list[Step] | None:
        if version_id not in self._steps:
            if self._graph is None:
                self._graph = version_graph()
            self._steps[version_id] = mapping_steps(source_id=version_id, target=self.target, graph=self._graph)
            if self._steps[version_id]:
                self._reach[version_id] = reach(self._steps[version_id])
        return self._steps[version_id]

    def snapshot(self, version_id: int) -> tuple:
        c = self.by_version[version_id]
        return (c.labels, c.mapped, c.unknown, c.dropped, c.no_path, self.mapped, self.unmappable, Counter(self.kinds))

    def delta(self, version_id: int, before: tuple) -> tuple:
        """What one ``map`` call added to the counts since ``snapshot`` (replayed for a repeated pattern)."""
        now = self.snapshot(version_id)
        return tuple(a - b for a, b in zip(now[:7], before[:7], strict=True)) + (now[7] - before[7],)

    def replay(self, version_id: int, delta: tuple) -> None:
        c = self.by_version[version_id]
        c.labels += delta[0]
        c.mapped += delta[1]
        c.unknown += delta[2]
        c.dropped += delta[3]
        c.no_path += delta[4]
        self.mapped += delta[5]
        self.unmappable += delta[6]
        self.kinds.update(delta[7])
        if version_id != self.target.pk and (delta[1] or delta[2] or delta[3]):
            self.sources.add(version_id)

    def note_target(self, n: int) -> None:
        """Count ``n`` labels read in the target version itself (folds that skip ``map`` for speed)."""
        c = self.by_version[self.target.pk]
        c.labels += n
        c.mapped += n

    def has_path(self, version_id: int) -> bool:
        return self.steps(version_id) is not None

    def map(self, version_id: int, values: dict[str, int | None]) -> dict[str, int | None]:
        counts = self.by_version[version_id]
        known = sum(1 for v in values.values() if v is not None)
        counts.labels += known
        if version_id == self.target.pk:
            counts.mapped += known
            return values
        steps = self.steps(version_id)
        if steps is None:
            self.unmappable += len(values)
            counts.no_path += known
            return {}
        key = (version_id, tuple(sorted(values.items(), key=lambda kv: kv[0])))
        hit = self._memo.get(key)
        if hit is None:
            out = map_codes(values, steps)
            reached = self._reach.get(version_id, {})
            n_mapped = n_unknown = n_dropped = 0
            for code, v in values.items():
                if v is None:
                    continue
                targets = reached.get(code, set())
                if not targets:
                    n_dropped += 1
                elif any(out.get(t) is not None for t in targets):
                    n_mapped += 1
                else:
                    n_unknown += 1
            kinds = tuple(kind for step in steps for old, _new, kind in step if old in values)
            hit = self._memo[key] = (out, (n_mapped, n_unknown, n_dropped, kinds))
        out, (n_mapped, n_unknown, n_dropped, kinds) = hit
        counts.mapped += n_mapped
        counts.unknown += n_unknown
        counts.dropped += n_dropped
        self.mapped += sum(1 for v in out.values() if v is not None)
        self.sources.add(version_id)
        self.kinds.update(kinds)
        return dict(out)

    def map_masks(
        self, version_id: int, codes: list[str], known: np.ndarray, present: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``map`` for many patterns of one source version at once (``taxonomy.mapping.map_masks``):
        bit i of ``known``/``present`` (uint64) is ``codes[i]``; returns (known, present) over
        ``self.codes``, decided values only, and adds to the counts exactly what calling ``map``
        once per pattern would add."""
        n = len(known)
        if not n:
            return known.copy(), present.copy()
        counts = self.by_version[version_id]
        n_known = popcount(known)
        counts.labels += n_known
        bit_of = {c: j for j, c in enumerate(self.codes)}
        if version_id == self.target.pk:
            counts.mapped += n_known
            return _place(codes, known, bit_of), _place(codes, present, bit_of)
        steps = self.steps(version_id)
        if steps is None:
            self.unmappable += n_known
            counts.no_path += n_known
            return np.zeros_like(known), np.zeros_like(known)
        out_codes, k2, p2 = map_masks(codes, known, present, steps)
        out_bit = {c: j for j, c in enumerate(out_codes)}
        reached = self._reach.get(version_id, {})
        one, zero = np.uint64(1), np.uint64(0)
        for i, code in enumerate(codes):
            has = (known >> np.uint64(i)) & one
            targets = reached.get(code, set())
            if not targets:
                counts.dropped += int(has.sum())
                continue
            r = np.uint64(sum(1 << out_bit[t] for t in targets if t in out_bit))
            ok = (k2 & r) != zero
            counts.mapped += int(has[ok].sum())
            counts.unknown += int(has[~ok].sum())
        self.mapped += popcount(k2)
        src_bit = {c: i for i, c in enumerate(codes)}
        for step in steps:
            for old, _new, kind in step:
                i = src_bit.get(old)
                if i is not None:
                    hits = int(((known >> np.uint64(i)) & one).sum())
                    if hits:
                        self.kinds[kind] += hits
        self.sources.add(version_id)
        return _place(out_codes, k2, bit_of), _place(out_codes, p2, bit_of)

    def reached(self, version_id: int) -> dict[str, set[str]]:
        """source code -> the target codes it reaches (empty for the target and unconnected versions)."""
        self.steps(version_id)
        return self._reach.get(version_id, {})

    def map_quiet(self, version_id: int, values: dict[str, int | None]) -> dict[str, int | None]:
        """``map`` without counting (a second look at values already counted)."""
        if version_id == self.target.pk:
            return values
        steps = self.steps(version_id)
        return {} if steps is None else map_codes(values, steps)

    def summary(self) -> list[dict]:
        """Per source version, in version order: label, whether it is the target, and the counts."""
        ids = [vid for vid, c in self.by_version.items() if c.labels or c.no_path]
        labels = {v.pk: v.label for v in TaxonomyVersion.objects.filter(pk__in=ids).select_related("taxonomy")}
        rows = [
            {"version_id": vid, "version": labels.get(vid, f"version {vid}"), "is_target": vid == self.target.pk}
            | self.by_version[vid].as_dict()
            for vid in ids
        ]
        return sorted(rows, key=lambda r: (not r["is_target"], r["version"]))


def _place(codes: list[str], masks: np.ndarray, bit_of: dict[str, int]) -> np.ndarray:
    """Masks with bit i = ``codes[i]`` rearranged to bit ``bit_of[code]``; codes not there drop out."""
    if [bit_of.get(c) for c in codes] == list(range(len(codes))):
        return masks.copy()
    out = np.zeros_like(masks)
    one = np.uint64(1)
    for i, c in enumerate(codes):
        j = bit_of.get(c)
        if j is not None:
            out |= ((masks >> np.uint64(i)) & one) << np.uint64(j)
    return out
