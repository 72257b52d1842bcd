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
from dataclasses import dataclass
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


def _round_sums(
    x: np.ndarray, ia: np.ndarray, ib: np.ndarray, *, n_modes: int, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The pairwise cell counts (rows, P, cols + 1, 4) and multi-rater unit terms (rows, cols + 1, S)
    of the observed data (row 0) and of every bootstrap resample (rows 1:); the last column pools
    every (trace, mode) unit."""
    n_traces, n_cols, n_pairs = x.shape[1], x.shape[2], len(ia)
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
    return pair_sums, multi_sums


@dataclass
class _RoundBlocks:
    """The statistics of one round's columns (modes, categories, overall) with their intervals."""

    raters: Sequence[str]
    ia: np.ndarray
    ib: np.ndarray
    pair_sums: np.ndarray
    multi_sums: np.ndarray
    ci: float
    max_undefined_share: float

    def __post_init__(self) -> None:
        self.pair = _pair_stats(self.pair_sums)  # each (rows, P, cols + 1)
        self.multi = _multi_stats(self.multi_sums, 2)  # each (rows, cols + 1)
        self.mean_kappa, self.mean_code, self.n_defined = _mean_defined(*self.pair["cohen_kappa"], axis=1)

    @property
    def n_pairs(self) -> int:
        return len(self.ia)

    def with_ci(self, values: FloatArray, codes: CodeArray) -> StatCI:
        return _with_ci(values, codes, ci=self.ci, max_undefined_share=self.max_undefined_share)

    def mean_kappa_at(self, col: int) -> MeanKappaStat:
        return {
            **self.with_ci(self.mean_kappa[:, col], self.mean_code[:, col]),
            "n_pairs": self.n_pairs,
            "n_pairs_defined": int(self.n_defined[0, col]),
        }

    def block(self, col: int) -> dict[str, Any]:
        """One column's multi-rater statistics, mean pairwise kappa and each pair's kappa."""
        multi, kappa = self.multi, self.pair["cohen_kappa"]
        return {
            "prevalence": _stat(multi["prevalence"][0][0, col], multi["prevalence"][1][0, col]),
            **{name: self.with_ci(multi[name][0][:, col], multi[name][1][:, col]) for name in _WITH_CI},
            "mean_pairwise_kappa": self.mean_kappa_at(col),
            "pairwise": [
                {
                    "a": self.raters[self.ia[p]],
                    "b": self.raters[self.ib[p]],
                    "kappa": _stat(kappa[0][0, p, col], kappa[1][0, p, col]),
                }
                for p in range(self.n_pairs)
            ],
        }

    def pairwise_overall(self, col: int) -> tuple[list[dict[str, Any]], list[list[float | None]]]:
        """Each pair's pooled kappa with its interval and percent agreement, and the rater x rater
        kappa matrix (1 on the diagonal)."""
        n = len(self.raters)
        matrix: list[list[float | None]] = [[1.0 if i == j else None for j in range(n)] for i in range(n)]
        kappa, agree = self.pair["cohen_kappa"], self.pair["percent_agreement"]
        pairwise = []
        for p in range(self.n_pairs):
            k = self.with_ci(kappa[0][:, p, col], kappa[1][:, p, col])
            matrix[self.ia[p]][self.ib[p]] = matrix[self.ib[p]][self.ia[p]] = k["value"]
            pairwise.append(
                {
                    "a": self.raters[self.ia[p]],
                    "b": self.raters[self.ib[p]],
                    "kappa": k,
                    "n_units": int(self.pair_sums[0, p, col].sum()),
                    "percent_agreement": _stat(agree[0][0, p, col], agree[1][0, p, col]),
                }
            )
        return pairwise, matrix


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
    overall = x.shape[2]
    ia, ib = np.triu_indices(n_raters, 1)
    pair_sums, multi_sums = _round_sums(x, ia, ib, n_modes=n_modes, n_boot=n_boot, seed=seed)
    blocks = _RoundBlocks(raters, ia, ib, pair_sums, multi_sums, ci, max_undefined_share)
    pairwise, kappa_matrix = blocks.pairwise_overall(overall)
    mode_cat = [categories[m] for m in modes]
    overall_block = blocks.block(overall)
    return {
        "raters": list(raters),
        "modes": list(modes),
        "n_traces": n_traces,
        "n_units": n_traces * n_modes,
        "pairwise": pairwise,
        "kappa_matrix": kappa_matrix,
        "mean_pairwise_kappa": overall_block["mean_pairwise_kappa"],
        "per_mode": [{"mode": m, "category": mode_cat[j], **blocks.block(j)} for j, m in enumerate(modes)],
        "per_category": [
            {
                "category": c,
                "modes": [m for m in modes if categories[m] == c],
                **blocks.block(n_modes + k),
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
