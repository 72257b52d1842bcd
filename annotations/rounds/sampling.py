"""Sampling the traces of a new round: a pure core (``sample_ids``) and the preview the create
form shows (``round_sample_preview``), which creates nothing."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models import Count

from traces.models import Project, Trace

# Trace fields a stratified sample may be stratified by (form value -> Trace field).
STRATA_FIELDS = {"framework": "mas_name", "benchmark": "benchmark", "llm": "llm_name"}
SAMPLING_METHODS = ("manual", "random", "stratified")


def sample_ids(candidates: Sequence[tuple[int, str]], *, method: str, n: int, seed: int) -> list[int]:
    """Pick ``n`` trace ids from ``(id, stratum)`` candidates; same inputs, same answer.

    ``random``: a uniform sample without replacement. ``stratified``: every stratum gets its
    share in proportion to its size (largest remainder), at least one trace, each
    stratum sampled uniformly; the result is shuffled so strata are interleaved for labelling.
    """
    if n < 1:
        raise ValidationError("The sample size must be at least 1.")
    pool = sorted(candidates)
    if n > len(pool):
        raise ValidationError(
            f"The sample size ({n}) is larger than the number of traces to sample from ({len(pool)})."
        )
    rng = np.random.default_rng(seed)
    ids = np.array([c[0] for c in pool], dtype=np.int64)
    if method == "random":
        return [int(i) for i in rng.choice(ids, size=n, replace=False)]
    if method != "stratified":
        raise ValidationError(f"Unknown sampling method {method!r}; expected random or stratified.")
    strata: dict[str, list[int]] = defaultdict(list)
    for tid, stratum in pool:
        strata[stratum].append(tid)
    keys = sorted(strata)
    if n < len(keys):
        raise ValidationError(
            f"A stratified sample needs at least one trace per stratum: {len(keys)} strata, but the sample size is {n}."
        )
    sizes = np.array([len(strata[k]) for k in keys], dtype=float)
    quota = n * sizes / sizes.sum()
    alloc = np.minimum(np.maximum(1, np.floor(quota)), sizes).astype(np.int64)
    # Hamilton's method with a floor of one per stratum: fix the total, ties by stratum order.
    while alloc.sum() > n:
        j = max((j for j in range(len(keys)) if alloc[j] > 1), key=lambda j: (alloc[j] - quota[j], -j))
        alloc[j] -= 1
    while alloc.sum() < n:
        j = max((j for j in range(len(keys)) if alloc[j] < sizes[j]), key=lambda j: (quota[j] - alloc[j], -j))
        alloc[j] += 1
    chosen: list[int] = []
    for k, take in zip(keys, alloc, strict=True):
        chosen.extend(int(i) for i in rng.choice(np.array(strata[k], dtype=np.int64), size=int(take), replace=False))
    order = rng.permutation(len(chosen))
    return [chosen[i] for i in order]


@dataclass
class SamplePreview:
    method: str
    n: int
    seed: int
    stratify_by: str
    traces: list[Trace]
    strata: list[tuple[str, int, int]] = field(default_factory=list)  # (stratum, in sample, available)
    sampling: dict[str, Any] = field(default_factory=dict)  # what Round.sampling stores


def round_sample_preview(
    *,
    project: Project,
    method: str,
    n: int = 0,
    seed: int = 0,
    stratify_by: str = "framework",
    trace_ids: Iterable[int] = (),
) -> SamplePreview:
    """The traces a round would get, without creating anything (what the create form shows)."""
    if method not in SAMPLING_METHODS:
        raise ValidationError(f"Unknown sampling method {method!r}; expected one of {', '.join(SAMPLING_METHODS)}.")
    base = Trace.objects.filter(project=project)
    if method == "manual":
        wanted = list(dict.fromkeys(int(t) for t in trace_ids))
        if not wanted:
            raise ValidationError("Pick at least one trace.")
        found = {
            t.pk: t
            for t in base.filter(pk__in=wanted).only("id", "title", "external_id", "mas_name", "benchmark", "llm_name")
        }
        missing = [t for t in wanted if t not in found]
        if missing:
            raise ValidationError(f"These trace ids are not in the project: {', '.join(map(str, missing))}.")
        ids = wanted
        stratify_by = ""
    else:
        if stratify_by not in STRATA_FIELDS:
            raise ValidationError(f"Unknown stratum {stratify_by!r}; expected one of {', '.join(STRATA_FIELDS)}.")
        fname = STRATA_FIELDS[stratify_by]
        candidates = [(tid, s or "(none)") for tid, s in base.values_list("id", fname)]
        ids = sample_ids(candidates, method=method, n=n, seed=seed)
        found = {
            t.pk: t
            for t in base.filter(pk__in=ids).only("id", "title", "external_id", "mas_name", "benchmark", "llm_name")
        }
    traces = [found[i] for i in ids]
    strata: list[tuple[str, int, int]] = []
    if method == "stratified":
        fname = STRATA_FIELDS[stratify_by]
        available = dict(base.values_list(fname).annotate(n=Count("id")).order_by())
        picked: dict[str, int] = defaultdict(int)
        for t in traces:
            picked[getattr(t, fname) or ""] += 1
        strata = [(k or "(none)", picked.get(k, 0), v) for k, v in sorted(available.items())]
    sampling: dict[str, Any] = {"method": method}
    if method != "manual":
        sampling.update({"n": n, "seed": seed})
    if method == "stratified":
        sampling["stratify_by"] = stratify_by
        sampling["strata"] = [{"stratum": s, "n": k, "available": a} for s, k, a in strata]
    return SamplePreview(method, len(traces), seed, stratify_by, traces, strata, sampling)
