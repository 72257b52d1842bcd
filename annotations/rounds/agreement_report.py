"""A calibration round's agreement report with bootstrap confidence intervals (pure numpy: no Django).

``round_report`` bootstraps by resampling traces. Because every statistic is a function of
sums over units (``annotations.rounds.agreement``), a resample is just a weighting of per-trace
sums: with the (n_boot x T) matrix of how often each trace was drawn, one matrix product gives
the sums for every resample at once, and the same formulas then run on a (1 + n_boot, ...)
array. This is what makes 1000 resamples of a 4 x 1642 x 14 round take a fraction of a second.
The labels array and the ``Stat`` conventions are those of ``annotations.rounds.agreement``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# The sufficient-statistics core is shared on purpose: the report and the public coefficients
# must run the very same formulas.
from annotations.rounds.agreement import (
    _OK,
    CodeArray,
    FloatArray,
    MeanKappaStat,
    StatCI,
    _binary,
    _mean_defined,
    _multi_stats,
    _pair_cells,
    _pair_stats,
    _stat,
    _unit_terms,
    category_codes,
    category_labels,
)

# --------------------------------------------------------------------------------------
# Bootstrap over traces
# --------------------------------------------------------------------------------------


def bootstrap_indices(n_traces: int, n_boot: int, seed: int) -> NDArray[np.int64]:
    """(n_boot, n_traces) trace indices drawn with replacement; what ``round_report`` uses."""
    rng = np.random.default_rng(seed)
    if n_traces == 0:
        return np.zeros((n_boot, 0), dtype=np.int64)
    return rng.integers(0, n_traces, size=(n_boot, n_traces))


def _resample_weights(indices: NDArray[np.int64], n_traces: int) -> FloatArray:
    """How many times each trace is drawn in each resample: (n_boot, n_traces)."""
    n_boot = indices.shape[0]
    flat = (indices + n_traces * np.arange(n_boot)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n_traces).reshape(n_boot, n_traces).astype(float)


def _with_ci(values: FloatArray, codes: CodeArray, *, ci: float, max_undefined_share: float) -> StatCI:
    """Point estimate (row 0) plus percentile CI over the bootstrap rows (1:)."""
    point = _stat(values[0], codes[0])
    boot, boot_ok = values[1:], codes[1:] == _OK
    n_boot, n_ok = len(boot), int(boot_ok.sum())
    interval: list[float] | None = None
    why: str | None = None
    if n_boot == 0:
        why = "no bootstrap resamples (n_boot is 0 or there are no traces)"
    elif point["value"] is None:
        why = "the statistic is undefined on the observed data"
    elif n_boot - n_ok > max_undefined_share * n_boot:
        why = (
            f"the statistic is undefined on {n_boot - n_ok} of {n_boot} resamples "
            f"(more than {max_undefined_share:.0%}), so a percentile interval would be biased"
        )
    else:
        tail = (1 - ci) / 2
        lo, hi = np.quantile(boot[boot_ok], [tail, 1 - tail])
        interval = [float(lo), float(hi)]
    return {**point, "ci": interval, "ci_undefined": why, "n_boot_defined": n_ok}


# --------------------------------------------------------------------------------------
# The round report
# --------------------------------------------------------------------------------------

# Multi-rater statistics reported with a bootstrap CI (prevalence is descriptive, no CI).
_WITH_CI = (
    "percent_agreement",
    "pabak",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
)


def round_report(
    labels: ArrayLike,
    *,
    raters: Sequence[str],
    modes: Sequence[str],
    categories: Mapping[str, str],
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    max_undefined_share: float = 0.05,
) -> dict[str, Any]:
    """Agreement report for one calibration round; JSON-safe (no numpy types, no NaN).

    Statistics are given per mode, per category (on ``category_labels``) and overall
    (pooled over every (trace, mode) unit). Confidence intervals are percentile bootstrap
    intervals from resampling traces with replacement (``bootstrap_indices(T, n_boot, seed)``);
    a CI is None, with ``ci_undefined`` saying why, when the statistic is undefined on more
    than ``max_undefined_share`` of the resamples.
    """
    arr = _binary(labels, 3, "labels")
    n_raters, n_traces, n_modes = arr.shape
    if len(raters) != n_raters or len(modes) != n_modes:
        raise ValueError(f"labels is {arr.shape} but {len(raters)} raters and {len(modes)} modes were given")
    if not 0 < ci < 1:
        raise ValueError("ci must be between 0 and 1")
    cats = category_codes(modes, categories)
    # Columns of units: the M modes, then the C categories. "Overall" is added after the sums.
    x = np.concatenate([arr, category_labels(arr, modes, categories)], axis=2)
    n_cols = x.shape[2]
    ia, ib = np.triu_indices(n_raters, 1)
    n_pairs = len(ia)

    # Per-trace sufficient statistics, flattened to (T, K) so all resamples are one matmul.
    cells = _pair_cells(x[ia], x[ib]).transpose(1, 0, 2, 3)  # (T, P, cols, 4)
    yes, no = (x == 1).sum(0), (x == 0).sum(0)
    terms = _unit_terms(np.stack([no, yes], axis=-1).astype(float))  # (T, cols, S)
    n_pair_cols = n_pairs * n_cols * 4
    per_trace = np.concatenate(
        [
            cells.reshape(n_traces, n_pair_cols),
            terms.reshape(n_traces, n_cols * terms.shape[-1]),
        ],
        axis=1,
    )
    weights = _resample_weights(bootstrap_indices(n_traces, n_boot, seed), n_traces)
    # Row 0 = the observed data (every trace once), rows 1: = the resamples.
    sums = np.vstack([per_trace.sum(0, keepdims=True), weights @ per_trace])

    n_rows = sums.shape[0]
    pair_sums = sums[:, :n_pair_cols].reshape(n_rows, n_pairs, n_cols, 4)
    multi_sums = sums[:, n_pair_cols:].reshape(n_rows, n_cols, -1)
    # Pooling over all (trace, mode) units is a sum of the per-mode sums.
    pair_sums = np.concatenate([pair_sums, pair_sums[:, :, :n_modes].sum(2, keepdims=True)], axis=2)
    multi_sums = np.concatenate([multi_sums, multi_sums[:, :n_modes].sum(1, keepdims=True)], axis=1)

    pair = _pair_stats(pair_sums)  # each (rows, P, cols + 1)
    multi = _multi_stats(multi_sums, 2)  # each (rows, cols + 1)
    mean_kappa, mean_code, n_defined = _mean_defined(*pair["cohen_kappa"], axis=1)

    def with_ci(values: FloatArray, codes: CodeArray) -> StatCI:
        return _with_ci(values, codes, ci=ci, max_undefined_share=max_undefined_share)

    def mean_kappa_at(col: int) -> MeanKappaStat:
        return {
            **with_ci(mean_kappa[:, col], mean_code[:, col]),
            "n_pairs": n_pairs,
            "n_pairs_defined": int(n_defined[0, col]),
        }

    def block(col: int) -> dict[str, Any]:
        return {
            "prevalence": _stat(multi["prevalence"][0][0, col], multi["prevalence"][1][0, col]),
            **{name: with_ci(multi[name][0][:, col], multi[name][1][:, col]) for name in _WITH_CI},
            "mean_pairwise_kappa": mean_kappa_at(col),
            "pairwise": [
                {
                    "a": raters[ia[p]],
                    "b": raters[ib[p]],
                    "kappa": _stat(
                        pair["cohen_kappa"][0][0, p, col],
                        pair["cohen_kappa"][1][0, p, col],
                    ),
                }
                for p in range(n_pairs)
            ],
        }

    overall = n_cols
    kappa_matrix: list[list[float | None]] = [
        [1.0 if i == j else None for j in range(n_raters)] for i in range(n_raters)
    ]
    pairwise = []
    for p in range(n_pairs):
        kappa = with_ci(pair["cohen_kappa"][0][:, p, overall], pair["cohen_kappa"][1][:, p, overall])
        kappa_matrix[ia[p]][ib[p]] = kappa_matrix[ib[p]][ia[p]] = kappa["value"]
        pairwise.append(
            {
                "a": raters[ia[p]],
                "b": raters[ib[p]],
                "kappa": kappa,
                "n_units": int(pair_sums[0, p, overall].sum()),
                "percent_agreement": _stat(
                    pair["percent_agreement"][0][0, p, overall],
                    pair["percent_agreement"][1][0, p, overall],
                ),
            }
        )

    mode_cat = [categories[m] for m in modes]
    overall_block = block(overall)
    return {
        "raters": list(raters),
        "modes": list(modes),
        "n_traces": n_traces,
        "n_units": n_traces * n_modes,
        "pairwise": pairwise,
        "kappa_matrix": kappa_matrix,
        "mean_pairwise_kappa": overall_block["mean_pairwise_kappa"],
        "per_mode": [{"mode": m, "category": mode_cat[j], **block(j)} for j, m in enumerate(modes)],
        "per_category": [
            {
                "category": c,
                "modes": [m for m in modes if categories[m] == c],
                **block(n_modes + k),
            }
            for k, c in enumerate(cats)
        ],
        # The overall pairwise kappas are the top-level "pairwise" list.
        "overall": {k: v for k, v in overall_block.items() if k != "pairwise"},
        "bootstrap": {
            "n_boot": int(n_boot),
            "seed": int(seed),
            "ci_level": float(ci),
            "unit": "trace",
            "method": "percentile",
            "max_undefined_share": float(max_undefined_share),
        },
    }
