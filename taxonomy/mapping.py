"""Carrying labels across taxonomy versions through the recorded mode mapping (``ModeMapping``).

A label of an older version reaches a newer one step by step along the newer version's parents;
``map_codes`` is the pure rule for one value per code, ``VersionMapper`` walks the chain for any
source version and counts what it carried (releases report the counts in their manifest).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from taxonomy.models import ModeMapping, TaxonomyVersion
from taxonomy.selectors import version_modes

Step = list[tuple[str, str, str]]  # (old_code, new_code, kind) edges of one version step


def mapping_steps(*, source_id: int, target: TaxonomyVersion) -> list[Step] | None:
    """The chain of mapping steps from version `source_id` to `target` along target's parents.

    [] when they are the same version, None when `source_id` is not an ancestor of `target`
    (labels of that version cannot be carried over).
    """
    chain: list[int] = []
    version: TaxonomyVersion | None = target
    seen: set[int] = set()
    while version is not None and version.pk != source_id:
        if version.pk in seen:
            return None
        seen.add(version.pk)
        chain.append(version.pk)
        version = version.parent
    if version is None:
        return None
    rows = defaultdict(list)
    for vid, old, new, kind in ModeMapping.objects.filter(version_id__in=chain).values_list(
        "version_id", "old_code", "new_code", "kind"
    ):
        rows[vid].append((old, new, kind))
    return [rows[vid] for vid in reversed(chain)]


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
            if kind == ModeMapping.Kind.SPLIT and v == 1:
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


class VersionMapper:
    """Maps {code: value} of any source version to the target version, caching the step chains."""

    def __init__(self, target: TaxonomyVersion, codes: list[str] | None = None) -> None:
        self.target = target
        self.codes = codes if codes is not None else [m.code for m in version_modes(version=target)]
        self._steps: dict[int, list[Step] | None] = {target.pk: []}
        self.mapped = 0
        self.unmappable = 0
        self.kinds: Counter[str] = Counter()
        self.sources: set[int] = set()

    def steps(self, version_id: int) -> list[Step] | None:
        if version_id not in self._steps:
            self._steps[version_id] = mapping_steps(source_id=version_id, target=self.target)
        return self._steps[version_id]

    def map(self, version_id: int, values: dict[str, int | None]) -> dict[str, int | None]:
        if version_id == self.target.pk:
            return values
        steps = self.steps(version_id)
        if steps is None:
            self.unmappable += len(values)
            return {}
        out = map_codes(values, steps)
        self.mapped += sum(1 for v in out.values() if v is not None)
        self.sources.add(version_id)
        for step in steps:
            for old, _new, kind in step:
                if old in values:
                    self.kinds[kind] += 1
        return out
