"""Did the fix work? The statistics of comparing two cohorts of traces (pure: numpy, scipy; no Django).

Per failure mode, cohort A (say, before a change) against cohort B (after it):

* each cohort's share of traces with the mode, with its Wilson 95% interval;
* the difference B - A with Newcombe's hybrid score interval (Newcombe 1998, method 10: the two
  Wilson intervals combined), as statsmodels' ``confint_proportions_2indep(method="newcomb")``;
* a two-sided score test of "no difference" (the pooled z test with Miettinen and Nurminen's
  n / (n - 1) variance factor), as ``test_proportions_2indep(method="score")``; p-values are then
  adjusted across the modes (Holm, or Benjamini-Hochberg: ``annotations.analytics.stats.p_adjust``);
* the minimum change, up or down, the two sample sizes could detect (two-sided, alpha 0.05, power
  0.8, on Cohen's arcsine scale, as statsmodels' ``NormalIndPower``): how far a mode would have had
  to move to be seen, so a team knows whether "no change" means "no change" or "too few traces";
* when the same tasks ran in both cohorts, the paired analysis: McNemar's exact test on the
  discordant pairs (as ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``) and the paired
  difference with its Wald interval;
* from a judge corrected by a random human sample in each cohort (prediction-powered inference,
  ``annotations.judge.prevalence``): the difference of the two corrected shares, its variance the
  sum of theirs (the cohorts are independent samples).

Undefined values are None with a reason, never 0: a cohort without traces has no share, two
cohorts where nobody ever saw the mode have no test.

Part of issue 31 (experiments): selectors.py, api.py and views.py use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, stats

from annotations.judge.prevalence import Z95, ppi_parts, wilson


def _sf(x: float) -> float:
    """The standard normal's upper tail."""
    return 0.5 * math.erfc(x / math.sqrt(2))


@dataclass(frozen=True)
class Difference:
    """B's share minus A's, with its 95% interval and the two-sided p-value of "no difference"."""

    value: float | None
    low: float | None
    high: float | None
    p_value: float | None
    undefined: str | None = None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "p_value": self.p_value,
                "undefined": self.undefined}  # fmt: skip


def newcombe_difference(k_a: int, n_a: int, k_b: int, n_b: int) -> tuple[float, float, float] | None:
    """B - A with Newcombe's hybrid score 95% interval; None when a cohort has no trace."""
    a, b = wilson(k_a, n_a), wilson(k_b, n_b)
    if a.value is None or b.value is None:
        return None
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    d = b.value - a.value
    low = d - math.sqrt((b.value - b.low) ** 2 + (a.high - a.value) ** 2)
    high = d + math.sqrt((b.high - b.value) ** 2 + (a.value - a.low) ** 2)
    return d, low, high


def score_test(k_a: int, n_a: int, k_b: int, n_b: int) -> float | None:
    """Two-sided p-value of the score test of equal shares; None when it is undefined (a cohort
    without traces, or the mode seen in all or none of the traces of both)."""
    n = n_a + n_b
    if n_a == 0 or n_b == 0:
        return None
    pooled = (k_a + k_b) / n
    var = pooled * (1 - pooled) * (1 / n_a + 1 / n_b) * n / (n - 1)
    if var <= 0:
        return None
    z = (k_b / n_b - k_a / n_a) / math.sqrt(var)
    return float(2 * stats.norm.sf(abs(z)))


def cohort_difference(k_a: int, n_a: int, k_b: int, n_b: int, *, counted: str = "this mode labelled") -> Difference:
    """The difference of two independent cohorts' shares: Newcombe interval, score test.
    ``counted`` says what a cohort without traces lacks ("a known outcome")."""
    if n_a == 0 or n_b == 0:
        which = "A" if n_a == 0 else "B"
        return Difference(None, None, None, None, f"cohort {which} has no trace with {counted}")
    interval = newcombe_difference(k_a, n_a, k_b, n_b)
    assert interval is not None  # both cohorts have traces
    d, low, high = interval
    p = score_test(k_a, n_a, k_b, n_b)
    why = None if p is not None else "the mode is in all or none of the traces of both cohorts: nothing to test"
    return Difference(d, low, high, p, why)


def minimum_detectable_change(
    share_a: float, n_a: int, n_b: int, *, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """The smallest change from ``share_a``, up or down, that the test would find (a fix lowers a
    share: a fall from p is a rise from 1 - p on the arcsine scale); None when neither would be."""
    rise = minimum_detectable_difference(share_a, n_a, n_b, alpha=alpha, power=power)
    fall = minimum_detectable_difference(1 - share_a, n_a, n_b, alpha=alpha, power=power)
    found = [d for d in (rise, fall) if d is not None]
    return min(found) if found else None


def minimum_detectable_difference(
    share_a: float, n_a: int, n_b: int, *, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """The smallest rise from ``share_a`` that a two-sided test at ``alpha`` would find with
    ``power`` at these sample sizes (Cohen's h solved as statsmodels' NormalIndPower does, mapped
    back to a share); None when even a rise to 1.0 would not be found or a cohort is empty."""
    if n_a == 0 or n_b == 0:
        return None
    sigma = math.sqrt(1 / n_a + 1 / n_b)
    crit = stats.norm.isf(alpha / 2)

    def reach(h: float) -> float:  # the power at effect h, less the wanted power (math.erfc: scipy's norm
        # costs 50 us a call, and brentq calls it ~30 times per mode)
        return _sf(crit - h / sigma) + _sf(crit + h / sigma) - power

    base = math.asin(math.sqrt(min(1.0, max(0.0, share_a))))
    top = math.pi / 2 - base  # h of a rise to 1.0 is 2 * top
    if top <= 0 or reach(2 * top) < 0:
        return None
    h = optimize.brentq(reach, 0.0, 2 * top, xtol=1e-12)
    return math.sin(base + h / 2) ** 2 - share_a


@dataclass(frozen=True)
class Paired:
    """The same tasks in both cohorts: b = tasks with the mode in A only, c = in B only."""

    n: int
    a_only: int
    b_only: int
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    undefined: str | None = None


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact two-sided p-value on the discordant pairs (statsmodels' exact=True)."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    return float(min(1.0, 2 * stats.binom.cdf(min(a_only, b_only), discordant, 0.5)))


def paired_difference(a: list[int], b: list[int]) -> Paired:
    """``a[i]``, ``b[i]``: the mode (1) or not (0) in task i's trace of cohort A and of cohort B.
    The share difference B - A with its Wald interval for paired proportions, McNemar's p."""
    if len(a) != len(b):
        raise ValueError("paired_difference: one entry per task in each cohort")
    n = len(a)
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    if n == 0:
        return Paired(0, 0, 0, None, None, None, None, "no task ran in both cohorts")
    d = (b_only - a_only) / n
    se = math.sqrt(max(0.0, (a_only + b_only) - (b_only - a_only) ** 2 / n)) / n
    return Paired(n, a_only, b_only, d, max(-1.0, d - Z95 * se), min(1.0, d + Z95 * se),
                  mcnemar_exact(a_only, b_only))  # fmt: skip


def ppi_difference(cohort_a: tuple, cohort_b: tuple) -> Difference:
    """B - A of two judge-corrected shares. Each cohort is (human labels on its random sample,
    the judge's labels on that sample, the judge's labels on the rest), as ppi_mean takes them."""
    parts = [ppi_parts(*cohort) for cohort in (cohort_a, cohort_b)]
    for name, (_, var, n) in zip("AB", parts, strict=True):
        if n < 2 or var is None:
            return Difference(None, None, None, None, f"cohort {name} has {n} human-labelled traces: at least 2 needed")
    (ta, va, _), (tb, vb, _) = parts
    assert va is not None and vb is not None  # checked above
    # each share clipped to [0, 1] as ppi_mean shows it (a small sample can push the estimate past
    # either end; clipping only brings it nearer the truth), so the difference is that of the shares shown
    d = min(1.0, max(0.0, tb)) - min(1.0, max(0.0, ta))
    se = math.sqrt(va + vb)
    if se == 0:
        return Difference(d, d, d, None, "no variation in either cohort: no test")
    p = float(2 * stats.norm.sf(abs(d) / se))
    return Difference(d, max(-1.0, d - Z95 * se), min(1.0, d + Z95 * se), p)

