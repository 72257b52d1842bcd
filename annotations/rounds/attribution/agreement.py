"""Agreement on failure attribution (pure numpy: no Django): the responsible agent and the decisive step.

Input, per rater r and trace t (R x T):

* ``agents[r][t]``: the agent the rater held responsible, or None (did not attribute);
* ``steps[r][t]``: the decisive step index, None when the rater did not attribute or answered
  "no single decisive step" (``none[r][t]`` True).

Definitions (the tests check the coefficients against scikit-learn and statsmodels):

* Agent, per pair of raters: Cohen's kappa and percent agreement over the traces both raters
  attributed to an agent (agent names are nominal categories). The headline is the mean of the
  defined pairwise kappas. Fleiss' kappa uses the traces every rater attributed to an agent
  (statsmodels' ``fleiss_kappa`` needs the same number of ratings per item). Overall percent
  agreement is the mean over pairs of the pair's share of equal agents, pooled over units.
* Step, over (pair, trace) units where both raters attributed (a step or "no single step"):
  exact agreement (same step, or both "no single step"), agreement within +-1 and +-3 steps
  (both "none" counts as agreement; "none" against a step never does), and the mean absolute
  step distance over the units where both named a step.
* CIs: percentile bootstrap over traces (the same resampling as the round report: one weight
  matrix, all statistics as weighted sums), 95 % by default.

Undefined cases are reported as in ``annotations.rounds.agreement`` (value None and the reason):
kappa when chance agreement is 1 (every rater named the same agent throughout), any statistic
without units.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np

from annotations.rounds.agreement import (
    _FEWER_THAN_TWO_RATERS,
    _NO_COMMON_UNITS,
    _NO_PAIR_DEFINED,
    _NO_PAIRABLE_UNITS,
    _OK,
    _ONE_CATEGORY,
    FloatArray,
    StatCI,
    _stat,
)
from annotations.rounds.agreement_report import _resample_weights, _with_ci, bootstrap_indices

WITHIN = (1, 3)


def _codes(agents: Sequence[Sequence[str | None]]) -> tuple[np.ndarray, list[str]]:
    names = sorted({a for row in agents for a in row if a})
    index = {a: i for i, a in enumerate(names)}
    codes = np.array([[index[a] if a else -1 for a in row] for row in agents], dtype=np.int64)
    return codes.reshape(len(agents), -1), names


def _kappa(po: FloatArray, pe: FloatArray, n: FloatArray) -> tuple[FloatArray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (po - pe) / (1 - pe)
    code = np.where(n == 0, _NO_COMMON_UNITS, np.where(np.isclose(pe, 1.0), _ONE_CATEGORY, _OK)).astype(np.int8)
    return np.where(code == _OK, value, np.nan), code


def _pair_agent(a: np.ndarray, b: np.ndarray, W: FloatArray, n_cat: int) -> dict[str, Any]:
    """Cohen's kappa and percent agreement for every weighting row of W (row 0 = the data)."""
    both = (a >= 0) & (b >= 0)
    n = W @ both
    eq = W @ (both & (a == b))
    A = np.zeros((a.size, n_cat))
    B = np.zeros((a.size, n_cat))
    idx = np.nonzero(both)[0]
    A[idx, a[idx]] = 1
    B[idx, b[idx]] = 1
    with np.errstate(divide="ignore", invalid="ignore"):
        po = eq / n
        pe = ((W @ A) * (W @ B)).sum(axis=1) / (n * n)
    kappa, kcode = _kappa(po, pe, n)
    pcode = np.where(n == 0, _NO_COMMON_UNITS, _OK).astype(np.int8)
    return {"kappa": (kappa, kcode), "percent": (np.where(n > 0, po, np.nan), pcode), "n": n, "eq": eq}


def _fleiss(codes: np.ndarray, W: FloatArray, n_cat: int) -> tuple[FloatArray, np.ndarray, int]:
    complete = (codes >= 0).all(axis=0)
    R = codes.shape[0]
    counts = np.zeros((codes.shape[1], n_cat))
    for r in range(R):
        idx = np.nonzero(complete)[0]
        np.add.at(counts, (idx, codes[r, idx]), 1)
    per_item = np.where(complete, ((counts**2).sum(axis=1) - R) / (R * (R - 1)) if R > 1 else 0.0, 0.0)
    w = W * complete
    n = w.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pbar = (w @ per_item) / n
        p = (w @ counts) / (n[:, None] * R)
        pe = (p**2).sum(axis=1)
        value = (pbar - pe) / (1 - pe)
    code = np.where(n == 0, _NO_PAIRABLE_UNITS, np.where(np.isclose(pe, 1.0), _ONE_CATEGORY, _OK))
    if R < 2:
        code = np.full_like(code, _FEWER_THAN_TWO_RATERS)
    code = code.astype(np.int8)
    return np.where(code == _OK, value, np.nan), code, int(complete.sum())


def _ratio(num: FloatArray, den: FloatArray, empty: int) -> tuple[FloatArray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = num / den
    code = np.where(den == 0, empty, _OK).astype(np.int8)
    return np.where(code == _OK, value, np.nan), code


def _step_sums(step: np.ndarray, nn: np.ndarray, attributed: np.ndarray, W: np.ndarray) -> dict[str, Any]:
    """Over every pair of raters, in the observed data (row 0) and each resample: the units both
    attributed, those on the same step (or both "no single step"), within k steps, and the summed
    distance between the steps both named."""
    rows = W.shape[0]
    out: dict[str, Any] = {"units": np.zeros(rows), "exact": np.zeros(rows), "dist": np.zeros(rows)}
    out |= {"dist_n": np.zeros(rows), "within": {k: np.zeros(rows) for k in WITHIN}}
    for i, j in combinations(range(step.shape[0]), 2):
        both = attributed[i] & attributed[j]
        both_none = nn[i] & nn[j]
        both_step = ~np.isnan(step[i]) & ~np.isnan(step[j])
        d = np.where(both_step, np.abs(np.nan_to_num(step[i]) - np.nan_to_num(step[j])), np.inf)
        out["units"] += W @ both
        out["exact"] += W @ (both_none | (both_step & (d == 0)))
        for k in WITHIN:
            out["within"][k] += W @ (both_none | (both_step & (d <= k)))
        out["dist"] += W @ np.where(both_step, d, 0.0)
        out["dist_n"] += W @ both_step
    return out


def _mean_kappa(kappas: list, kcodes: list, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the pairs' defined kappas per row, with the code saying why where none is."""
    if not kappas:
        return np.full(rows, np.nan), np.full(rows, _FEWER_THAN_TWO_RATERS, dtype=np.int8)
    K = np.vstack(kappas)
    C = np.vstack(kcodes)
    ok = C == _OK
    n_ok = ok.sum(axis=0)
    with np.errstate(invalid="ignore"):
        mean_k = np.where(n_ok > 0, np.where(ok, K, 0).sum(axis=0) / np.maximum(n_ok, 1), np.nan)
    return mean_k, np.where(n_ok > 0, _OK, _NO_PAIR_DEFINED).astype(np.int8)


def attribution_agreement(
    *,
    agents: Sequence[Sequence[str | None]],
    steps: Sequence[Sequence[int | None]],
    none: Sequence[Sequence[bool]],
    raters: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    max_undefined_share: float = 0.05,
) -> dict[str, Any]:
    """The attribution section of a round report (see the module docstring)."""
    codes, names = _codes(agents)
    R, T = codes.shape if codes.size else (len(raters), 0)
    step = np.array([[np.nan if s is None else float(s) for s in row] for row in steps], dtype=float).reshape(R, T)
    nn = np.array(none, dtype=bool).reshape(R, T)
    attributed = ~np.isnan(step) | nn
    W = np.vstack([np.ones((1, T)), _resample_weights(bootstrap_indices(T, n_boot, seed), T)])
    n_cat = max(len(names), 1)

    def with_ci(values, vcodes) -> StatCI:
        return _with_ci(values, vcodes, ci=ci, max_undefined_share=max_undefined_share)

    pairs, kappas, kcodes = [], [], []
    eq_sum = np.zeros(W.shape[0])
    n_sum = np.zeros(W.shape[0])
    for i, j in combinations(range(R), 2):
        res = _pair_agent(codes[i], codes[j], W, n_cat)
        kappas.append(res["kappa"][0])
        kcodes.append(res["kappa"][1])
        eq_sum += res["eq"]
        n_sum += res["n"]
        pairs.append(
            {
                "a": raters[i],
                "b": raters[j],
                "kappa": _stat(res["kappa"][0][0], res["kappa"][1][0]),
                "percent_agreement": _stat(res["percent"][0][0], res["percent"][1][0]),
                "n": int(res["n"][0]),
            }
        )
    sums = _step_sums(step, nn, attributed, W)
    units, dist_n = sums["units"], sums["dist_n"]
    mean_k, mean_code = _mean_kappa(kappas, kcodes, W.shape[0])
    fleiss, fcode, n_complete = _fleiss(codes, W, n_cat) if R else (mean_k, mean_code, 0)
    pct = _ratio(eq_sum, n_sum, _NO_COMMON_UNITS if R > 1 else _FEWER_THAN_TWO_RATERS)
    return {
        "raters": list(raters),
        "n_traces": T,
        "n_attributed": {raters[r]: int(attributed[r].sum()) for r in range(R)},
        "n_no_single_step": {raters[r]: int(nn[r].sum()) for r in range(R)},
        "agents": names,
        "agent": {
            "mean_pairwise_kappa": with_ci(mean_k, mean_code),
            "fleiss_kappa": {**with_ci(fleiss, fcode), "n_units": n_complete},
            "percent_agreement": with_ci(*pct),
            "pairs": pairs,
        },
        "step": {
            "exact": with_ci(*_ratio(sums["exact"], units, _NO_COMMON_UNITS)),
            **{f"within_{k}": with_ci(*_ratio(sums["within"][k], units, _NO_COMMON_UNITS)) for k in WITHIN},
            "mean_abs_distance": with_ci(*_ratio(sums["dist"], dist_n, _NO_COMMON_UNITS)),
            "n_units": int(units[0]),
            "n_units_with_steps": int(dist_n[0]),
        },
        "n_boot": n_boot,
        "ci_level": ci,
    }
