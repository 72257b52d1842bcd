"""Failure analytics over a trace x mode label matrix (pure: numpy, scipy, statsmodels; no Django).

The matrix ``X`` has one row per trace and one column per failure mode, with 1.0 (present),
0.0 (absent) or NaN (unknown / not labelled). What "share" means, as in the MAST paper:

* share of failures: a mode's present labels over all present labels (the paper's FM-1.3 at 17.14%);
* share of traces: a mode's present labels over the traces where that mode is known.

Undefined values are NaN, never 0: a correlation with a constant column, a rate with no traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import fisher_exact

CORRECTIONS = {"holm": "holm", "bh": "fdr_bh"}


def p_adjust(p: np.ndarray, method: str) -> np.ndarray:
    """Holm or Benjamini-Hochberg adjusted p-values (as statsmodels' multipletests "holm" and
    "fdr_bh", tested against it). Written out because multipletests calls gc.collect() on every
    call, which costs the dashboard 0.1-0.5 s."""
    p = np.asarray(p, dtype=float)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="mergesort")
    ranked = p[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    elif method == "fdr_bh":
        adj = np.minimum.accumulate((m / np.arange(m, 0, -1)) * ranked[::-1])[::-1]
        adj = np.minimum(1.0, adj)
    else:
        raise ValueError(f"unknown correction method {method!r}")
    out = np.empty(m)
    out[order] = adj
    return out


def _nan_div(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


@dataclass(frozen=True)
class ModeShare:
    code: str
    present: int
    known: int
    share_of_failures: float
    share_of_traces: float


def mode_distribution(X: np.ndarray, codes: list[str]) -> list[ModeShare]:
    present = np.count_nonzero(X == 1, axis=0) if X.size else np.zeros(len(codes), int)
    known = np.count_nonzero(~np.isnan(X), axis=0) if X.size else np.zeros(len(codes), int)
    total = int(present.sum())
    of_failures = _nan_div(present, total)
    of_traces = _nan_div(present, known)
    return [
        ModeShare(c, int(present[i]), int(known[i]), float(of_failures[i]), float(of_traces[i]))
        for i, c in enumerate(codes)
    ]


def category_matrix(X: np.ndarray, column_categories: list[str], categories: list[str]) -> np.ndarray:
    """Trace x category: 1 when any mode of the category is present, 0 when all its modes are
    known absent, NaN otherwise."""
    out = np.full((X.shape[0], len(categories)), np.nan)
    cols = np.asarray(column_categories)
    present, unknown = X == 1, np.isnan(X)  # once, not per category
    for j, cat in enumerate(categories):
        idx = np.flatnonzero(cols == cat)
        if idx.size == 0:
            continue
        column = out[:, j]
        column[~np.any(unknown[:, idx], axis=1)] = 0.0
        column[np.any(present[:, idx], axis=1)] = 1.0
    return out


def category_distribution(
    X: np.ndarray, column_categories: list[str], categories: list[str], C: np.ndarray | None = None
) -> list[dict]:
    """Per category: its failures (present labels), share of all failures, share of traces showing it.
    ``C``: ``category_matrix`` of the same arguments, when the caller has it already."""
    cols = np.asarray(column_categories)
    per_mode = np.count_nonzero(X == 1, axis=0)
    present = np.array([int(per_mode[cols == c].sum()) for c in categories])
    total = int(present.sum())
    C = category_matrix(X, column_categories, categories) if C is None else C
    showing = np.count_nonzero(C == 1, axis=0)
    known_or_present = np.count_nonzero(~np.isnan(C), axis=0)
    return [
        {
            "category": cat,
            "failures": int(present[j]),
            "share_of_failures": float(_nan_div(present[j], total)),
            "traces_showing": int(showing[j]),
            "share_of_traces": float(_nan_div(showing[j], known_or_present[j])),
        }
        for j, cat in enumerate(categories)
    ]


@dataclass(frozen=True)
class Groups:
    """A column of group names (framework, LLM, benchmark) as codes into its distinct values, as
    pandas' categoricals: comparing 100,000 small integers costs a fraction of comparing strings."""

    values: np.ndarray  # distinct names (unicode array, sorted)
    codes: np.ndarray  # int per row: position in ``values``

    def strings(self) -> np.ndarray:
        return self.values[self.codes]

    def equals(self, value: str) -> np.ndarray:
        """Row mask of the rows named ``value``."""
        at = int(np.searchsorted(self.values, value))
        if at < len(self.values) and self.values[at] == value:
            return self.codes == at
        return np.zeros(len(self.codes), dtype=bool)


def _group_masks(groups) -> list[tuple]:
    """(group value, row mask) per distinct value, the empty value last, others by name. ``Groups``
    compare as integers; an array is kept in its own dtype: a unicode array compares in C, where
    an object array compared element by element in Python (100,000 rows x 7 groups)."""
    if isinstance(groups, Groups):
        used = np.flatnonzero(np.bincount(groups.codes, minlength=len(groups.values)))
        names = {str(groups.values[i]): int(i) for i in used}
        return [(g, groups.codes == names[g]) for g in sorted(names, key=lambda v: (v == "", v))]
    arr = np.asarray(groups)
    return [(g, arr == g) for g in sorted(set(arr.tolist()), key=lambda v: (v == "", str(v)))]


def per_group(X: np.ndarray, groups: np.ndarray, column_categories: list[str], categories: list[str]) -> list[dict]:
    """Per group (framework): traces, failures, failures per trace, failure rate (traces with at
    least one failure), and failures per category (the paper's failures-per-system figure)."""
    cols = np.asarray(column_categories)
    out = []
    for g, m in _group_masks(groups):
        rows = X[m]
        n = rows.shape[0]
        present = rows == 1
        failures = int(present.sum())
        any_failure = np.any(present, axis=1)
        out.append(
            {
                "group": g,
                "traces": n,
                "failures": failures,
                "failures_per_trace": float(_nan_div(failures, n)),
                "failure_rate": float(_nan_div(int(any_failure.sum()), n)),
                "by_category": {c: int(present[:, cols == c].sum()) for c in categories},
            }
        )
    return out


def phi_matrix(X: np.ndarray) -> np.ndarray:
    """Pairwise phi (Pearson on 0/1) over rows where both columns are known; NaN when undefined."""
    k = X.shape[1]
    out = np.full((k, k), np.nan)
    known = ~np.isnan(X)
    # Sums over pairwise-complete rows, all pairs at once, as matrix products of 0/1 matrices: in
    # float32 (half the time of float64) while every sum stays below 2**24, where float32 counts
    # exactly; the results are the same integers.
    dtype = np.float32 if X.shape[0] < 2**24 else float
    V = (X == 1).astype(dtype)  # binary: the present cells, 0 where absent or unknown
    Kf = known.astype(dtype)
    n = (Kf.T @ Kf).astype(float)
    sx = (V.T @ Kf).astype(float)  # sum of column i over rows where j known
    sxx = sx  # binary: x^2 == x
    sxy = (V.T @ V).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_i = sx / n
        mean_j = sx.T / n
        cov = sxy / n - mean_i * mean_j
        var_i = sxx / n - mean_i**2
        var_j = sxx.T / n - mean_j**2
        r = cov / np.sqrt(var_i * var_j)
    valid = (n > 1) & (var_i > 1e-12) & (var_j > 1e-12)
    out[valid] = np.clip(r[valid], -1.0, 1.0)
    return out


def off_diagonal_range(M: np.ndarray) -> tuple[float, float]:
    """Smallest and largest finite off-diagonal value (NaN, NaN when there is none)."""
    if M.size == 0:
        return float("nan"), float("nan")
    mask = ~np.eye(M.shape[0], dtype=bool) & np.isfinite(M)
    vals = M[mask]
    return (float(vals.min()), float(vals.max())) if vals.size else (float("nan"), float("nan"))


@dataclass(frozen=True)
class CohortRow:
    code: str
    a_present: int
    a_known: int
    b_present: int
    b_known: int
    a_rate: float
    b_rate: float
    p_value: float
    p_corrected: float
    significant: bool


def cohort_compare(
    A: np.ndarray, B: np.ndarray, codes: list[str], *, correction: str = "holm", alpha: float = 0.05
) -> list[CohortRow]:
    """Per mode: rates in two slices, two-sided Fisher's exact p, and p corrected across modes
    (Holm by default, or Benjamini-Hochberg "bh"). Modes with no labels in a slice get p = NaN and
    are left out of the correction."""
    method = CORRECTIONS.get(correction)
    if method is None:
        raise ValueError(f"unknown correction {correction!r}: use one of {', '.join(CORRECTIONS)}")
    ap = np.nansum(A == 1, axis=0).astype(int) if A.size else np.zeros(len(codes), int)
    ak = np.sum(~np.isnan(A), axis=0).astype(int) if A.size else np.zeros(len(codes), int)
    bp = np.nansum(B == 1, axis=0).astype(int) if B.size else np.zeros(len(codes), int)
    bk = np.sum(~np.isnan(B), axis=0).astype(int) if B.size else np.zeros(len(codes), int)
    p = np.full(len(codes), np.nan)
    for i in range(len(codes)):
        if ak[i] and bk[i]:
            table = [[ap[i], ak[i] - ap[i]], [bp[i], bk[i] - bp[i]]]
            p[i] = fisher_exact(table, alternative="two-sided").pvalue
    pc = np.full(len(codes), np.nan)
    tested = ~np.isnan(p)
    if tested.any():
        pc[tested] = p_adjust(p[tested], method)
    ar, br = _nan_div(ap, ak), _nan_div(bp, bk)
    return [
        CohortRow(
            codes[i],
            int(ap[i]),
            int(ak[i]),
            int(bp[i]),
            int(bk[i]),
            float(ar[i]),
            float(br[i]),
            float(p[i]),
            float(pc[i]),
            bool(tested[i] and pc[i] < alpha),
        )
        for i in range(len(codes))
    ]


def significance_marker(p: float) -> str:
    if p != p:  # NaN
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def efficiency(
    groups: np.ndarray,
    steps: np.ndarray,
    switches: np.ndarray,
    repeated: np.ndarray,
    failed: np.ndarray,
    success: np.ndarray,
) -> list[dict]:
    """Per group: mean steps, agent switches and repeated steps per trace beside correctness
    (failure rate from the labels; task success rate where the outcome is known)."""
    out = []
    for g, m in _group_masks(groups):
        n = int(m.sum())
        s = success[m]
        known = ~np.isnan(s)
        out.append(
            {
                "group": g,
                "traces": n,
                "mean_steps": float(np.mean(steps[m])) if n else float("nan"),
                "median_steps": float(np.median(steps[m])) if n else float("nan"),
                "mean_switches": float(np.mean(switches[m])) if n else float("nan"),
                "mean_repeated": float(np.mean(repeated[m])) if n else float("nan"),
                "failure_rate": float(np.mean(failed[m])) if n else float("nan"),
                "success_rate": float(np.mean(s[known])) if known.any() else float("nan"),
                "outcomes_known": int(known.sum()),
            }
        )
    return out
