"""The vectorised mapping (``map_masks``, ``VersionMapper.map_masks``) and fold
(``agreed_fold_arrays``) give exactly what the per-pattern rules give (``map_codes``,
``VersionMapper.map``, ``agreed_fold``) on random labels: same values, same unknowns, same
per-version counts, through renames, splits, merges, added and removed modes and versions no
mapping reaches."""

from __future__ import annotations

import random

import numpy as np
import pytest

from annotations.rounds.agreed import MaskArrays, agreed_fold, agreed_fold_arrays
from taxonomy.mapping import VersionMapper, map_codes, map_masks
from taxonomy.models import Category, FailureMode, Taxonomy, TaxonomyVersion
from taxonomy.selectors import versions_mode_codes

CODES = list("abcdefgh")
KINDS = ["same", "edit", "rename", "split", "merge", "add", "remove"]


def random_step(rng: random.Random, olds: list[str]) -> list[tuple[str, str, str]]:
    news = [f"{c}{rng.randint(0, 3)}" for c in olds] + ["z", "y"]
    step = []
    for old in olds:
        for _ in range(rng.choice([0, 1, 1, 1, 2])):  # dropped, mapped once, or split in two
            step.append((old, rng.choice(news), rng.choice(KINDS)))
    for _ in range(rng.randint(0, 2)):
        step.append(("", rng.choice(news), "add"))
    step.append((rng.choice(olds), "", "remove"))
    return step


def decoded(codes, known, present, i):
    return {
        c: int(present[i] >> np.uint64(j) & np.uint64(1))
        for j, c in enumerate(codes)
        if known[i] >> np.uint64(j) & np.uint64(1)
    }


@pytest.mark.parametrize("seed", range(30))
def test_map_masks_agrees_with_map_codes_on_random_steps(seed):
    rng = random.Random(seed)
    steps, olds = [], CODES
    for _ in range(rng.randint(1, 3)):
        step = random_step(rng, olds)
        steps.append(step)
        olds = sorted({n for _o, n, _k in step if n}) or ["z"]
    patterns = []
    for _ in range(200):
        values = {c: rng.randint(0, 1) for c in CODES if rng.random() < 0.6}
        patterns.append(values)
    known = np.array([sum(1 << CODES.index(c) for c in v) for v in patterns], dtype=np.uint64)
    present = np.array([sum(1 << CODES.index(c) for c, x in v.items() if x) for v in patterns], dtype=np.uint64)
    out_codes, k2, p2 = map_masks(CODES, known, present, steps)
    for i, values in enumerate(patterns):
        expected = {c: v for c, v in map_codes(values, steps).items() if v is not None}
        assert decoded(out_codes, k2, p2, i) == expected, (values, steps)


@pytest.fixture
def versions(db, mast_version):
    """v1 (MAST), v2 drafted from it (a rename, a split, a removal, an addition), v3 from v2 (a
    merge), and a version of another taxonomy with no mapping to any of them."""
    from taxonomy.services import (
        mode_add,
        mode_merge,
        mode_remove,
        mode_rename,
        mode_split,
        version_draft_from,
        version_publish,
    )

    v2 = version_draft_from(source=mast_version)
    mode_rename(mode=v2.modes.get(code="1.3"), new_code="1.3r", new_name="Repeated")
    mode_split(
        mode=v2.modes.get(code="2.1"),
        into=[{"code": "2.1a", "name": "A", "definition": "a"}, {"code": "2.1b", "name": "B", "definition": "b"}],
    )
    mode_remove(mode=v2.modes.get(code="1.5"))
    mode_add(version=v2, code="3.9", name="New", definition="new")
    version_publish(version=v2)
    v3 = version_draft_from(source=v2)
    mode_merge(modes=[v3.modes.get(code="2.1a"), v3.modes.get(code="2.2")], code="2.2", name="M", definition="m")
    version_publish(version=v3)
    other = TaxonomyVersion.objects.create(
        taxonomy=Taxonomy.objects.create(name="Elsewhere", slug="elsewhere"), number=1
    )
    cat = Category.objects.create(version=other, code="X", name="X")
    for i in range(5):
        FailureMode.objects.create(version=other, category=cat, code=f"X.{i}", name=f"x{i}", definition="x")
    return [mast_version, v2, v3, other]


def random_rows(rng: random.Random, modes: dict[int, list[tuple[int, str]]], n_traces: int) -> list[tuple]:
    rows = []
    for rid in range(1, 60):
        vid = rng.choice(list(modes))
        n = len(modes[vid])
        for tid in rng.sample(range(1, n_traces + 1), rng.randint(1, n_traces)):
            k = rng.getrandbits(n) if rng.random() < 0.9 else 0
            rows.append((tid, rid, vid, rng.getrandbits(n) & k, k))
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_the_array_fold_equals_agreed_fold_on_every_target(versions, seed):
    rng = random.Random(seed)
    modes = versions_mode_codes(version_ids={v.pk for v in versions})
    rows = random_rows(rng, modes, 40)
    layouts = {vid: [c for _m, c in ms] for vid, ms in modes.items()}
    for target in versions[:3]:
        codes = [c for _m, c in modes[target.pk]]
        ref_mapper, new_mapper = VersionMapper(target, codes=codes), VersionMapper(target, codes=codes)
        ref = agreed_fold(rows, modes=modes, mapper=ref_mapper)
        new = agreed_fold_arrays(MaskArrays.from_rows(rows, layouts), mapper=new_mapper)
        assert new.trace_ids.tolist() == sorted(ref.known)
        assert new.known.tolist() == [ref.known[t] for t in sorted(ref.known)]
        assert new.present.tolist() == [ref.present[t] for t in sorted(ref.known)]
        assert new_mapper.summary() == ref_mapper.summary()
        assert any(r["unknown"] for r in ref_mapper.summary()) or target == versions[2]
        assert any(r["no_path"] for r in ref_mapper.summary())
        assert (new_mapper.mapped, new_mapper.unmappable) == (ref_mapper.mapped, ref_mapper.unmappable)
        assert +new_mapper.kinds == +ref_mapper.kinds
        assert new_mapper.sources == ref_mapper.sources


def test_the_array_fold_takes_rows_in_their_order_and_target_labels_in_any_layout(versions):
    v1 = versions[0]
    modes = versions_mode_codes(version_ids={v1.pk})
    codes = [c for _m, c in modes[v1.pk]]
    reversed_layout = {v1.pk: list(reversed(codes))}  # bit 0 is the last code
    n = len(codes)
    rows = [(7, 1, v1.pk, 1 << (n - 1), 1 << (n - 1)), (7, 2, v1.pk, 0, 1 << (n - 1))]  # present, then absent
    folded = agreed_fold_arrays(MaskArrays.from_rows(rows, reversed_layout), mapper=VersionMapper(v1, codes=codes))
    assert folded.known.tolist() == [1] and folded.present.tolist() == [0]  # codes[0], the later row's absent
