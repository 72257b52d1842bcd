"""How common each failure mode is, three ways (pure numpy + scipy: no Django, no ORM).

With judge labels on many traces and agreed human labels on a subset:

- ``judge only``: the share of traces the judge labels present, over every judged trace. Biased
  by the judge's errors; its interval (Wilson) covers sampling only, not that bias.
- ``humans only``: the share among the traces with agreed labels (Wilson interval). Unbiased for
  the project when that subset is a random sample, but wide when it is small.
- ``corrected``: prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic,
  "Prediction-powered inference", Science 382, 2023): the judge's share on the traces without
  human labels plus the mean human-minus-judge difference ("rectifier") on the traces with both,

      theta = mean(f(unlabelled)) + mean(y - f(labelled)),
      se^2  = var(f(unlabelled)) / N + var(y - f(labelled)) / n,

  with a normal 95% interval, clipped to [0, 1]. Valid (covers the true share about 95% of the
  time) when the human-labelled traces are a random sample of the judged ones, whatever the
  judge's accuracy; a good judge only makes it narrower. ``tests/annotations/judge/
  test_prevalence.py`` checks the coverage against a simulation where the true share is known.

``rogan_gladen`` is the classical alternative (Rogan and Gladen, Am. J. Epidemiol. 107, 1978):
(judge share + specificity - 1) / (sensitivity + specificity - 1), with the judge's sensitivity
and specificity measured on the labelled subset; undefined when sensitivity + specificity <= 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Share:
    value: float | None
    low: float | None
    high: float | None
    n: int
    undefined: str | None = None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "undefined": self.undefined}


def wilson(k: int, n: int) -> Share:
    """A binomial share with its Wilson 95% interval."""
    if n == 0:
        return Share(None, None, None, 0, "no trace")
    p = k / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return Share(p, max(0.0, centre - half), min(1.0, centre + half), n)


def ppi_parts(
    y_labelled: np.ndarray, f_labelled: np.ndarray, f_unlabelled: np.ndarray
) -> tuple[float, float | None, int]:
    """(estimate, its variance, n labelled) of the prediction-powered mean of y (module
    docstring), unclipped; the variance is None with fewer than two labelled traces. For an
    interval use ppi_mean; experiments combine the parts of two cohorts."""
    y = np.asarray(y_labelled, dtype=float)
    fl = np.asarray(f_labelled, dtype=float)
    fu = np.asarray(f_unlabelled, dtype=float)
    n, N = len(y), len(fu)
    if n == 0:
        return float("nan"), None, 0
    if len(fl) != n:
        raise ValueError("y_labelled and f_labelled must have one entry per labelled trace")
    rect = y - fl
    if N == 0:  # every judged trace has human labels: the estimate is the human mean
        return float(y.mean()), (float(y.var(ddof=1)) / n if n > 1 else None), n
    var_u = float(fu.var(ddof=1)) / N if N > 1 else 0.0
    var_r = float(rect.var(ddof=1)) / n if n > 1 else None
    return float(fu.mean() + rect.mean()), (None if var_r is None else var_u + var_r), n


def ppi_mean(y_labelled: np.ndarray, f_labelled: np.ndarray, f_unlabelled: np.ndarray) -> Share:
    """Prediction-powered estimate of the mean of y, with its 95% interval (module docstring)."""
    theta, var, n = ppi_parts(y_labelled, f_labelled, f_unlabelled)
    if n == 0:
        return Share(None, None, None, 0, "no trace has both agreed human labels and judge labels")
    if var is None:
        return Share(min(1.0, max(0.0, theta)), None, None, n, "one labelled trace: no interval")
    half = Z95 * math.sqrt(var)
    return Share(min(1.0, max(0.0, theta)), max(0.0, theta - half), min(1.0, theta + half), n)


def rogan_gladen(judge_share: float, sensitivity: float, specificity: float) -> float | None:
    """The judge's share corrected by its measured sensitivity and specificity (None: undefined)."""
    youden = sensitivity + specificity - 1
    if youden <= 0:
        return None
    return min(1.0, max(0.0, (judge_share + specificity - 1) / youden))


def prevalence_three_ways(*, judge: np.ndarray, human: np.ndarray) -> dict[str, Share | float | None]:
    """One mode: ``judge`` (0/1 per judged trace) and ``human`` (0/1 or NaN per same trace).

    Returns judge only, humans only, corrected (PPI) and the Rogan-Gladen point estimate."""
    judge = np.asarray(judge, dtype=float)
    human = np.asarray(human, dtype=float)
    has_h = ~np.isnan(human)
    j_only = wilson(int(judge.sum()), len(judge))
    h_only = wilson(int(human[has_h].sum()), int(has_h.sum()))
    corrected = ppi_mean(human[has_h], judge[has_h], judge[~has_h])
    rg = None
    pos, neg = has_h & (human > 0.5), has_h & (human < 0.5)
    if pos.any() and neg.any() and j_only.value is not None:
        rg = rogan_gladen(j_only.value, float(judge[pos].mean()), float(1 - judge[neg].mean()))
    return {"judge": j_only, "humans": h_only, "corrected": corrected, "rogan_gladen": rg}
