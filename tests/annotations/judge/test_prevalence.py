"""The corrected failure shares against a simulation where the true share is known."""

import numpy as np
import pytest

from annotations.judge.prevalence import ppi_mean, prevalence_three_ways, rogan_gladen, wilson


def simulate(rng, *, p, sens, spec, n_judged, n_labelled):
    y = (rng.random(n_judged) < p).astype(float)
    f = np.where(y == 1, rng.random(n_judged) < sens, rng.random(n_judged) >= spec).astype(float)
    human = np.full(n_judged, np.nan)
    idx = rng.choice(n_judged, n_labelled, replace=False)  # a random subset gets human labels
    human[idx] = y[idx]
    return f, human


@pytest.mark.parametrize(("p", "sens", "spec"), [(0.3, 0.7, 0.95), (0.1, 0.9, 0.8), (0.5, 0.9, 0.5)])
def test_the_corrected_interval_covers_the_true_share_about_95_percent_of_the_time(p, sens, spec):
    rng = np.random.default_rng(7)
    hits = judge_hits = 0
    trials = 600
    for _ in range(trials):
        f, human = simulate(rng, p=p, sens=sens, spec=spec, n_judged=1500, n_labelled=150)
        shares = prevalence_three_ways(judge=f, human=human)
        c = shares["corrected"]
        hits += c.low <= p <= c.high
        j = shares["judge"]
        judge_hits += j.low <= p <= j.high
    assert 0.92 <= hits / trials <= 0.975
    # The judge's own share is biased by its errors: its interval mostly misses the truth.
    assert judge_hits / trials < 0.5


def test_the_corrected_estimate_is_narrower_than_humans_alone_with_a_good_judge():
    rng = np.random.default_rng(3)
    f, human = simulate(rng, p=0.3, sens=0.95, spec=0.95, n_judged=2000, n_labelled=100)
    shares = prevalence_three_ways(judge=f, human=human)
    c, h = shares["corrected"], shares["humans"]
    assert (c.high - c.low) < (h.high - h.low)


def test_a_perfect_judge_makes_every_estimate_the_judge_share():
    y = np.array([1, 0, 0, 1, 0, 0, 0, 1, 0, 0] * 10, dtype=float)
    human = y.copy()
    human[50:] = np.nan
    shares = prevalence_three_ways(judge=y, human=human)
    assert shares["corrected"].value == pytest.approx(y.mean())
    assert shares["rogan_gladen"] == pytest.approx(y.mean())


def test_no_labelled_trace_is_undefined_not_zero():
    share = ppi_mean(np.array([]), np.array([]), np.array([1.0, 0.0]))
    assert share.value is None and share.undefined


def test_rogan_gladen_is_undefined_for_a_judge_no_better_than_chance():
    assert rogan_gladen(0.4, 0.5, 0.5) is None
    assert rogan_gladen(0.34, 0.8, 0.9) == pytest.approx((0.34 + 0.9 - 1) / 0.7)


def test_wilson_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(0, 10), (3, 10), (10, 10), (37, 200)]:
        low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
        s = wilson(k, n)
        assert s.low == pytest.approx(low, abs=1e-9) and s.high == pytest.approx(high, abs=1e-9)
