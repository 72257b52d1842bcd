"""An experiment on one judge's labels corrected by the agreed human labels (prediction-powered
inference per cohort, ``stats.ppi_difference``).

In each cohort the traces the judge labelled split in two: those with agreed human labels too (the
human sample: y and the judge's f on them) and the rest (f only). Each cohort's share is the judge's
share on the rest plus the mean human-minus-judge difference on the sample; the difference B - A has
the two variances summed. Valid when each cohort's human sample is a random draw of its judged
traces (a round's random sample, or the live policy's); the page and the API say so.

The power column uses each cohort's effective sample size (the share's p(1 - p) over its corrected
variance): what a plain human-labelled sample of that size would tell.
"""

from __future__ import annotations

import numpy as np

from annotations.analytics.stats import category_matrix
from annotations.experiments import stats
from annotations.judge.prevalence import ppi_mean, ppi_parts

PREFIX = "corrected:"
ASSUMPTION = (
    "valid when the traces with agreed labels are a random sample of each cohort's judged traces "
    "(a round drawn at random); a hand-picked sample biases it"
)


def _cohort(f: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y on the human sample, f on it, f on the rest) of one column, judge-known rows only."""
    judged = ~np.isnan(f)
    f, y = f[judged], y[judged]
    sample = ~np.isnan(y)
    return y[sample], f[sample], f[~sample]


def _share(parts: tuple) -> dict:
    y, fl, fu = parts
    share = ppi_mean(y, fl, fu).as_dict()
    return {**share, "k": None, "n": int(len(fl) + len(fu)), "n_human": int(len(y))}


def _effective_n(parts: tuple) -> int:
    theta, var, _ = ppi_parts(*parts)
    if var is None or not np.isfinite(theta) or var <= 0:
        return 0
    p = min(1.0, max(0.0, theta))
    return int(p * (1 - p) / var) if 0 < p < 1 else int(len(parts[0]))


def _row(code: str, name: str, a: tuple, b: tuple) -> dict:
    share_a = _share(a)
    n_a, n_b = _effective_n(a), _effective_n(b)
    mdd = stats.minimum_detectable_change(share_a["value"], n_a, n_b) if share_a["value"] is not None else None
    return {
        "code": code,
        "name": name,
        "a": share_a,
        "b": _share(b),
        "difference": stats.ppi_difference(a, b).as_dict(),
        "p_adjusted": None,
        "min_detectable": mdd,
    }


def aligned_human(J, H, sample: set[int] | None = None) -> np.ndarray:
    """The agreed labels ``H`` on the rows of the judge's matrix ``J`` (NaN where a trace has none);
    both ``label_matrix`` results on the same version. ``sample``: only these traces' agreed labels
    count (the live policy's uniformly random human sample, ``annotations.judge.live``)."""
    if J.codes != H.codes:
        raise ValueError("the judge's and the humans' matrices must be on the same taxonomy version")
    at = {pk: i for i, pk in enumerate(H.trace_ids.tolist())}
    rows_h = np.array([at.get(pk, -1) for pk in J.trace_ids.tolist()], dtype=int)
    Y = np.full(J.X.shape, np.nan)
    has = rows_h >= 0
    Y[has] = H.X[rows_h[has]]
    if sample is not None:
        Y[~np.isin(J.trace_ids, np.fromiter(sample, dtype=np.int64, count=len(sample)))] = np.nan
    return Y


def corrected_rows(J, H, mask_a: np.ndarray, mask_b: np.ndarray, sample: set[int] | None = None
                   ) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Mode rows and category rows from judge matrix ``J`` and agreed matrix ``H`` (both
    ``label_matrix`` results on the same version), cohorts as masks over ``J``'s rows; ``sample`` as
    ``aligned_human``'s."""
    Y = aligned_human(J, H, sample)
    Jc = category_matrix(J.X, J.column_categories, J.categories)
    Yc = category_matrix(Y, J.column_categories, J.categories)

    def rows(F, Yx, codes, names):
        return [
            _row(c, names.get(c, ""), _cohort(F[mask_a, i], Yx[mask_a, i]), _cohort(F[mask_b, i], Yx[mask_b, i]))
            for i, c in enumerate(codes)
        ]

    return rows(J.X, Y, J.codes, J.names), rows(Jc, Yc, J.categories, J.category_names)
