"""Inter-annotator agreement coefficients for calibration rounds (pure numpy: no Django, no ORM).

A calibration round is a float array ``labels`` of shape (R raters, T traces, M modes):
1.0 = the rater says the failure mode is present in the trace, 0.0 = absent,
NaN = the rater gave no label. The unit of agreement is one (trace, mode) yes/no decision.

Every statistic is reported as a ``Stat``: ``{"value": float | None, "undefined": str | None}``.
When a statistic is 0/0 (e.g. Cohen's kappa when both raters always answer "absent") the value
is None and ``undefined`` says why. We never report a silent 0 or 1 and never raise for it.

How the module is laid out, and why:

* The maths lives in three "from sufficient statistics" functions
  (``_pair_stats``, ``_multi_stats`` and ``_mean_defined``). Each statistic is a closed
  formula of a few sums over units (2x2 cell counts for a pair of raters; per-unit rating
  counts for many raters), and the formulas accept any leading array shape.
* The public functions (``cohen_kappa``, ``fleiss_kappa`` ...) sum those per-unit terms once.
* ``annotations.rounds.agreement_report.round_report`` assembles a round's report with bootstrap
  CIs from the same sufficient-statistics functions (see that module for how).

Definitions where the textbooks leave a choice (all chosen to agree with the reference
libraries on complete data; the tests check them against scikit-learn, statsmodels and
krippendorff):

* Cohen's kappa, percent agreement, PABAK and two-rater AC1 use the units both raters labelled.
* The multi-rater statistics (Fleiss' kappa, Gwet's AC1, Krippendorff's alpha, observed
  agreement) use the units with at least two ratings ("pairable" units). Observed agreement
  is Fleiss' P-bar: the mean over pairable units of the share of agreeing rater pairs. With
  missing labels, Fleiss' category shares are taken over pairable units, so the coefficient
  reduces to statsmodels' ``fleiss_kappa`` when every unit has the same number of raters.
  Gwet's category shares follow Gwet (2008/2014): the mean over units with at least one
  rating of each unit's share of ratings in the category.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
CodeArray = NDArray[np.int8]


class Stat(TypedDict):
    """A statistic, or the reason it is undefined (then ``value`` is None)."""

    value: float | None
    undefined: str | None


class StatCI(Stat):
    """A statistic with a percentile bootstrap confidence interval.

    ``ci`` is None when the interval cannot be trusted; ``ci_undefined`` then says why.
    ``n_boot_defined`` counts the resamples on which the statistic was defined.
    """

    ci: list[float] | None
    ci_undefined: str | None
    n_boot_defined: int


class MeanKappaStat(StatCI):
    """Mean of the defined pairwise Cohen's kappas (the MAST paper's "average kappa")."""

    n_pairs: int
    n_pairs_defined: int


# Why a statistic is undefined. Vectorised code carries these small integer codes alongside
# the values (one per resample) and only the reported ones are turned into words.
_OK = 0
_NO_COMMON_UNITS = 1
_PAIR_CONSTANT = 2
_NO_PAIRABLE_UNITS = 3
_ONE_CATEGORY = 4
_ONE_VALUE = 5
_NO_RATINGS = 6
_FEWER_THAN_TWO_RATERS = 7
_NO_PAIR_DEFINED = 8
_ONE_SCALE_CATEGORY = 9

_REASONS = {
    _NO_COMMON_UNITS: "no unit was labelled by both raters",
    _PAIR_CONSTANT: "both raters gave the same answer on every unit (kappa is 0/0)",
    _NO_PAIRABLE_UNITS: "no unit was labelled by two or more raters",
    _ONE_CATEGORY: "every rating is in the same category, so chance agreement is 1 (kappa is 0/0)",
    _ONE_VALUE: "only one value occurs among the pairable ratings, so expected disagreement is 0 (alpha is 0/0)",
    _NO_RATINGS: "there is no non-missing rating",
    _FEWER_THAN_TWO_RATERS: "there are fewer than two raters",
    _NO_PAIR_DEFINED: "Cohen's kappa is undefined for every pair of raters",
    _ONE_SCALE_CATEGORY: "the rating scale has fewer than two categories",
}


# --------------------------------------------------------------------------------------
# The maths: statistics from sufficient statistics (any leading shape)
# --------------------------------------------------------------------------------------


def _safe_div(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den, NaN where den == 0 (callers attach the reason code)."""
    num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _pair_cells(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Per-unit 2x2 indicators (n11, n10, n01, n00) for two raters; all 0 if either is missing."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.stack(
        [
            (a == 1) & (b == 1),
            (a == 1) & (b == 0),
            (a == 0) & (b == 1),
            (a == 0) & (b == 0),
        ],
        axis=-1,
    ).astype(float)


def _pair_stats(cells: FloatArray) -> dict[str, tuple[FloatArray, CodeArray]]:
    """Two-rater binary statistics from summed 2x2 counts, shape (..., 4) = n11, n10, n01, n00.

    Kappa is computed as (n*agree - E) / (n^2 - E) with E = n^2 * expected agreement, so the
    0/0 test is an exact comparison of integer-valued floats (counts, or counts times
    integer bootstrap multiplicities), not a tolerance on 1 - pe.
    """
    n11, n10, n01, n00 = np.moveaxis(cells, -1, 0)
    n = n11 + n10 + n01 + n00
    agree = n11 + n00
    a1, b1 = n11 + n10, n11 + n01  # "present" totals of rater a and rater b
    chance = a1 * b1 + (n - a1) * (n - b1)
    no_units = n == 0

    kappa = _safe_div(n * agree - chance, n * n - chance)
    kappa_code = np.where(no_units, _NO_COMMON_UNITS, np.where(n * n == chance, _PAIR_CONSTANT, _OK))

    po = _safe_div(agree, n)
    # Gwet's AC1, two raters, two categories: pe = 2 pi (1 - pi) with pi the mean "present"
    # share of the two raters. pe <= 1/2, so AC1 is defined whenever there is a unit.
    pi = _safe_div(a1 + b1, 2 * n)
    pe = 2 * pi * (1 - pi)
    ac1 = (po - pe) / (1 - pe)

    common = np.where(no_units, _NO_COMMON_UNITS, _OK)
    return {
        "cohen_kappa": (kappa, kappa_code.astype(np.int8)),
        "percent_agreement": (po, common.astype(np.int8)),
        "pabak": (2 * po - 1, common.astype(np.int8)),
        "gwet_ac1": (ac1, common.astype(np.int8)),
    }


def _unit_terms(counts: FloatArray) -> FloatArray:
    """Per-unit additive terms for the multi-rater statistics.

    ``counts`` has shape (..., Q): how many raters put the unit in each of Q categories.
    Returns shape (..., 4 + 3Q), laid out as read back by ``_multi_stats``:
    [pairable, agreement, disagreement, pairable counts (Q), rated, shares (Q), counts (Q)].
    """
    r = counts.sum(-1)
    sq = (counts * counts).sum(-1)
    pairable = r >= 2
    # Non-pairable units get a dummy denominator; their terms are zeroed by the where().
    r_safe = np.where(pairable, r, 2)
    rm1 = r_safe - 1
    # Fleiss' P_i / Gwet's p_a term: the share of ordered rater pairs that agree on the unit.
    agreement = np.where(pairable, (sq - r) / (r_safe * rm1), 0.0)
    # Krippendorff: the unit's off-diagonal mass in the coincidence matrix,
    # sum_{c != k} n_uc n_uk / (m_u - 1).
    disagreement = np.where(pairable, (r * r - sq) / rm1, 0.0)
    rated = r >= 1
    shares = counts / np.where(rated, r, 1)[..., None]
    return np.concatenate(
        [
            pairable[..., None],
            agreement[..., None],
            disagreement[..., None],
            counts * pairable[..., None],
            rated[..., None],
            shares,
            counts,
        ],
        axis=-1,
    ).astype(float)


def _multi_stats(sums: FloatArray, q: int) -> dict[str, tuple[FloatArray, CodeArray]]:
    """Multi-rater statistics from ``_unit_terms`` summed over units, shape (..., 4 + 3Q)."""
    n_pairable = sums[..., 0]
    agreement = sums[..., 1]
    disagreement = sums[..., 2]
    pair_counts = sums[..., 3 : 3 + q]
    n_rated = sums[..., 3 + q]
    shares = sums[..., 4 + q : 4 + 2 * q]
    all_counts = sums[..., 4 + 2 * q : 4 + 3 * q]

    no_pairs = n_pairable == 0
    pairable_code = np.where(no_pairs, _NO_PAIRABLE_UNITS, _OK)
    po = _safe_div(agreement, n_pairable)

    # spread = n^2 (1 - pe) for Fleiss and n(n-1) D_e for Krippendorff; zero iff only one
    # category is used. It is integer-valued, so the 0/0 test is exact.
    n = pair_counts.sum(-1)
    sum_sq = (pair_counts * pair_counts).sum(-1)
    spread = n * n - sum_sq

    def spread_code(why: int) -> CodeArray:
        return np.where(no_pairs, _NO_PAIRABLE_UNITS, np.where(spread == 0, why, _OK)).astype(np.int8)

    # kappa = (po - pe) / (1 - pe) with pe = sum_k p_k^2, p_k = n_k / n; times n^2 / n^2.
    fleiss = _safe_div(n * n * po - sum_sq, spread)

    # alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k
    alpha = 1 - _safe_div((n - 1) * disagreement, spread)

    if q >= 2:
        pi = _safe_div(shares, n_rated[..., None])
        pe_gwet = (pi * (1 - pi)).sum(-1) / (q - 1)
        ac1 = (po - pe_gwet) / (1 - pe_gwet)
        ac1_code = pairable_code
        pabak = (q * po - 1) / (q - 1)
        pabak_code = pairable_code
    else:
        ac1 = pabak = np.full(n_pairable.shape, np.nan)
        ac1_code = pabak_code = np.where(no_pairs, _NO_PAIRABLE_UNITS, _ONE_SCALE_CATEGORY)

    total = all_counts.sum(-1)
    # Prevalence is the share of the last category: "present" (1) for yes/no labels.
    prevalence = _safe_div(all_counts[..., -1], total) if q else np.full(total.shape, np.nan)
    return {
        "percent_agreement": (po, pairable_code.astype(np.int8)),
        "pabak": (pabak, np.asarray(pabak_code, np.int8)),
        "fleiss_kappa": (fleiss, spread_code(_ONE_CATEGORY)),
        "gwet_ac1": (ac1, np.asarray(ac1_code, np.int8)),
        "krippendorff_alpha": (alpha, spread_code(_ONE_VALUE)),
        "prevalence": (
            prevalence,
            np.where(total == 0, _NO_RATINGS, _OK).astype(np.int8),
        ),
    }


def _mean_defined(values: FloatArray, codes: CodeArray, axis: int) -> tuple[FloatArray, CodeArray, NDArray[np.int64]]:
    """Mean over ``axis`` of the defined entries (undefined pairs are skipped, and counted)."""
    defined = codes == _OK
    n_defined = defined.sum(axis)
    total = np.where(defined, values, 0.0).sum(axis)
    mean = _safe_div(total, n_defined)
    if values.shape[axis] == 0:
        code = np.full(mean.shape, _FEWER_THAN_TWO_RATERS)
    else:
        code = np.where(n_defined == 0, _NO_PAIR_DEFINED, _OK)
    return mean, code.astype(np.int8), n_defined


# --------------------------------------------------------------------------------------
# Input checks and conversions
# --------------------------------------------------------------------------------------


def _binary(x: ArrayLike, ndim: int, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    ok = np.isnan(arr) | (arr == 0) | (arr == 1)
    if not ok.all():
        raise ValueError(f"{name} may only hold 0, 1 or NaN")
    return arr


def _pair(a: ArrayLike, b: ArrayLike) -> FloatArray:
    a, b = _binary(a, 1, "a"), _binary(b, 1, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b differ in length: {a.shape[0]} != {b.shape[0]}")
    return _pair_cells(a, b).sum(0)


def _counts_table(counts: ArrayLike) -> FloatArray:
    arr = np.asarray(counts, dtype=float)
    if arr.ndim != 2 or (arr < 0).any() or not np.isfinite(arr).all():
        raise ValueError("counts must be a 2-D (items x categories) table of non-negative counts")
    return arr


def _stat(value: Any, code: Any) -> Stat:
    code = int(code)
    if code != _OK:
        return {"value": None, "undefined": _REASONS[code]}
    return {"value": float(value), "undefined": None}


def rating_counts(ratings: ArrayLike) -> FloatArray:
    """(raters x units) 0/1/NaN matrix -> (units x 2) table: raters saying absent, present."""
    arr = _binary(ratings, 2, "ratings")
    yes = (arr == 1).sum(0)
    no = (arr == 0).sum(0)
    return np.stack([no, yes], axis=1).astype(float)


# --------------------------------------------------------------------------------------
# Public statistics on plain arrays
# --------------------------------------------------------------------------------------


def cohen_kappa(a: ArrayLike, b: ArrayLike) -> Stat:
    """Cohen's kappa of two raters' 0/1 labels (1-D, NaN = missing; pairs with a NaN dropped).

    Undefined when no unit has both labels, or when both raters give one and the same answer
    on every unit (expected agreement 1, kappa 0/0).
    """
    return _stat(*_pair_stats(_pair(a, b))["cohen_kappa"])


def percent_agreement(a: ArrayLike, b: ArrayLike) -> Stat:
    """Share of units (labelled by both raters) on which two raters agree."""
    return _stat(*_pair_stats(_pair(a, b))["percent_agreement"])


def pabak(a: ArrayLike, b: ArrayLike) -> Stat:
    """Prevalence- and bias-adjusted kappa for two raters, binary labels: 2 * po - 1."""
    return _stat(*_pair_stats(_pair(a, b))["pabak"])


def gwet_ac1(a: ArrayLike, b: ArrayLike) -> Stat:
    """Gwet's AC1 for two raters, binary labels (Gwet 2008): pe = 2 pi (1 - pi)."""
    return _stat(*_pair_stats(_pair(a, b))["gwet_ac1"])


def _multi(counts: ArrayLike, name: str) -> Stat:
    table = _counts_table(counts)
    return _stat(*_multi_stats(_unit_terms(table).sum(0), table.shape[1])[name])


def percent_agreement_multi(counts: ArrayLike) -> Stat:
    """Observed agreement of many raters (Fleiss' P-bar) from an items x categories table."""
    return _multi(counts, "percent_agreement")


def pabak_multi(counts: ArrayLike) -> Stat:
    """PABAK for many raters: (Q * P-bar - 1) / (Q - 1), Q = number of categories."""
    return _multi(counts, "pabak")


def gwet_ac1_multi(counts: ArrayLike) -> Stat:
    """Gwet's AC1 for many raters (Gwet 2008) from an items x categories count table.

    Rows may have different totals (missing ratings); p_a uses the rows with two or more
    ratings, the category shares pi_k the rows with at least one.
    """
    return _multi(counts, "gwet_ac1")


def fleiss_kappa(counts: ArrayLike) -> Stat:
    """Fleiss' kappa from an items x categories count table.

    Equals statsmodels' ``fleiss_kappa`` when every row has the same total. With missing
    ratings, rows with fewer than two ratings are ignored and each row's agreement uses its
    own number of raters.
    """
    return _multi(counts, "fleiss_kappa")


def krippendorff_alpha_nominal(reliability_data: ArrayLike) -> Stat:
    """Krippendorff's alpha, nominal metric, for a (raters x units) array; NaN = missing.

    Any numeric codes are accepted as category labels. Units with fewer than two ratings
    carry no information about agreement and are skipped, as in Krippendorff (2011).
    """
    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2:
        raise ValueError(f"reliability_data must be 2-D (raters x units), got shape {data.shape}")
    values = np.unique(data[~np.isnan(data)])
    counts = (data[:, :, None] == values).sum(0).astype(float)  # units x values
    return _stat(*_multi_stats(_unit_terms(counts).sum(0), len(values))["krippendorff_alpha"])


def prevalence(labels: ArrayLike) -> Stat:
    """Share of "present" among the non-missing 0/1 labels (any shape)."""
    arr = np.asarray(labels, dtype=float)
    rated = ~np.isnan(arr)
    n = int(rated.sum())
    if n == 0:
        return _stat(np.nan, _NO_RATINGS)
    return _stat((arr[rated] == 1).sum() / n, _OK)


def pairwise_kappa_matrix(labels: ArrayLike) -> FloatArray:
    """R x R Cohen's kappas, each pooled over all (trace, mode) units of ``labels``.

    ``labels`` is (R, T, M) or (R, units). Undefined kappas are NaN; the diagonal is 1.0.
    The mean of the off-diagonal entries is the "average Cohen's kappa" of the MAST paper.
    """
    arr = np.asarray(labels, dtype=float)
    arr = _binary(arr.reshape(arr.shape[0], -1), 2, "labels")
    r = arr.shape[0]
    ia, ib = np.triu_indices(r, 1)
    value, code = _pair_stats(_pair_cells(arr[ia], arr[ib]).sum(1))["cohen_kappa"]
    out = np.eye(r)
    out[ia, ib] = out[ib, ia] = np.where(code == _OK, value, np.nan)
    return out


# --------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------


def category_codes(modes: Sequence[str], categories: Mapping[str, str]) -> list[str]:
    """The categories of ``modes``, in order of first appearance (the order used below)."""
    missing = [m for m in modes if m not in categories]
    if missing:
        raise ValueError(f"modes without a category: {missing}")
    return list(dict.fromkeys(categories[m] for m in modes))


def category_labels(labels: ArrayLike, modes: Sequence[str], categories: Mapping[str, str]) -> FloatArray:
    """Collapse (R, T, M) mode labels to (R, T, C) category labels (C in ``category_codes`` order).

    For one rater and trace, a category is
      * present (1) if any of its modes is present;
      * else absent (0) if at least one of its modes is labelled (and so all labelled are 0);
      * else missing (NaN): the rater labelled none of its modes.
    A category with some modes absent and some missing therefore counts as absent.
    """
    arr = _binary(labels, 3, "labels")
    if arr.shape[2] != len(modes):
        raise ValueError(f"labels has {arr.shape[2]} modes but {len(modes)} mode codes were given")
    mode_cat = [categories[m] for m in modes]
    out = []
    for cat in category_codes(modes, categories):
        block = arr[:, :, [i for i, c in enumerate(mode_cat) if c == cat]]
        present = (block == 1).any(-1)
        labelled = (~np.isnan(block)).any(-1)
        out.append(np.where(present, 1.0, np.where(labelled, 0.0, np.nan)))
    return np.stack(out, axis=-1) if out else np.zeros(arr.shape[:2] + (0,))
