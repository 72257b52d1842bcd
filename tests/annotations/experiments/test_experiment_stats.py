"""The experiment statistics (annotations/experiments/stats.py) against statsmodels and scipy on the
same counts, rare modes and empty cohorts included (issue 31)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats import proportion as smp  # its test_ function would be collected by name
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import NormalIndPower

from annotations.experiments.stats import (
    cohort_difference,
    mcnemar_exact,
    minimum_detectable_change,
    minimum_detectable_difference,
    paired_difference,
    ppi_difference,
)
from annotations.judge.prevalence import ppi_parts

# statsmodels warns of its own 0/0 on the degenerate counts compared here on purpose
pytestmark = pytest.mark.filterwarnings("ignore:.*scalar divide:RuntimeWarning")

# (k_a, n_a, k_b, n_b): common, rare, one zero, both zero, all present, unequal sizes, tiny
COUNTS = [(40, 100, 22, 100), (3, 500, 0, 480), (0, 60, 5, 70), (1, 10, 9, 10), (17, 17, 12, 19),
          (120, 1642, 95, 800), (1, 2, 0, 3), (250, 400, 251, 400)]  # fmt: skip


@pytest.mark.parametrize(("k_a", "n_a", "k_b", "n_b"), COUNTS)
def test_the_difference_and_its_newcombe_interval_equal_statsmodels(k_a, n_a, k_b, n_b):
    d = cohort_difference(k_a, n_a, k_b, n_b)
    low, high = smp.confint_proportions_2indep(k_b, n_b, k_a, n_a, method="newcomb", compare="diff")
    assert d.value == pytest.approx(k_b / n_b - k_a / n_a, abs=1e-12)
    assert (d.low, d.high) == (pytest.approx(low, abs=1e-10), pytest.approx(high, abs=1e-10))


@pytest.mark.parametrize(("k_a", "n_a", "k_b", "n_b"), COUNTS)
def test_the_score_test_equals_statsmodels(k_a, n_a, k_b, n_b):
    ours = cohort_difference(k_a, n_a, k_b, n_b).p_value
    theirs = smp.test_proportions_2indep(k_b, n_b, k_a, n_a, method="score", compare="diff").pvalue
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_a_mode_nobody_saw_and_an_empty_cohort_say_why_instead_of_a_number():
    never = cohort_difference(0, 50, 0, 60)
    assert (never.value, never.p_value) == (0.0, None) and "nothing to test" in never.undefined
    # statsmodels agrees there is nothing to test: its statistic is not a number
    assert math.isnan(smp.test_proportions_2indep(0, 60, 0, 50, method="score", compare="diff").pvalue)
    empty = cohort_difference(0, 0, 4, 30)
    assert (empty.value, empty.low, empty.high, empty.p_value) == (None, None, None, None)
    assert "cohort A has no trace" in empty.undefined


@pytest.mark.parametrize(("share", "n_a", "n_b"), [(0.2, 100, 100), (0.02, 500, 300), (0.5, 40, 60), (0.9, 1000, 50)])
def test_the_minimum_detectable_difference_is_statsmodels_power_on_the_arcsine_scale(share, n_a, n_b):
    mdd = minimum_detectable_difference(share, n_a, n_b)
    h = NormalIndPower().solve_power(effect_size=None, nobs1=n_a, alpha=0.05, power=0.8, ratio=n_b / n_a)
    expected = math.sin(math.asin(math.sqrt(share)) + h / 2) ** 2 - share
    assert mdd == pytest.approx(expected, abs=1e-6)
    # and a rise of exactly that much is found 80% of the time
    achieved = NormalIndPower().power(
        effect_size=2 * math.asin(math.sqrt(share + mdd)) - 2 * math.asin(math.sqrt(share)),
        nobs1=n_a, alpha=0.05, ratio=n_b / n_a,
    )  # fmt: skip
    assert achieved == pytest.approx(0.8, abs=1e-6)


def test_too_few_traces_to_see_even_a_rise_to_every_trace_is_said():
    assert minimum_detectable_difference(0.95, 3, 2) is None
    assert minimum_detectable_difference(0.1, 0, 20) is None


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (3, 0), (10, 4), (25, 31), (1, 12)])
def test_mcnemar_exact_equals_statsmodels(a_only, b_only):
    table = [[7, a_only], [b_only, 20]]
    assert mcnemar_exact(a_only, b_only) == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-12)


def test_the_paired_difference_counts_discordant_tasks_with_a_wald_interval():
    a = [1, 1, 0, 0, 1, 0, 1, 1, 0, 0] * 5
    b = [0, 1, 0, 1, 0, 0, 0, 1, 0, 0] * 5
    p = paired_difference(a, b)
    n, bb, cc = 50, 15, 5  # A only 15 (3 a block), B only 5
    assert (p.n, p.a_only, p.b_only) == (n, bb, cc)
    d = (cc - bb) / n
    se = math.sqrt(bb + cc - (cc - bb) ** 2 / n) / n
    assert (p.difference, p.low, p.high) == (pytest.approx(d), pytest.approx(d - 1.959964 * se, abs=1e-6),
                                             pytest.approx(d + 1.959964 * se, abs=1e-6))  # fmt: skip
    assert p.p_value == pytest.approx(mcnemar([[0, bb], [cc, 0]], exact=True).pvalue)
    assert paired_difference([], []).undefined == "no task ran in both cohorts"
    with pytest.raises(ValueError, match="one entry per task"):
        paired_difference([1], [1, 0])


def test_the_judge_corrected_difference_adds_the_two_cohorts_variances_and_covers_the_truth():
    """Simulated: a judge that over-reports the mode by 0.15 in both cohorts, a 10% random human
    sample; the corrected difference covers the true one (0.10) about 95% of the time, the judge's
    raw difference would be biased the other way in B where the judge also misses more."""
    rng = np.random.default_rng(31)
    covered, trials = 0, 400
    for _ in range(trials):
        cohorts = []
        for truth, miss in ((0.30, 0.0), (0.40, 0.2)):
            y = rng.random(2000) < truth
            f = np.where(y, rng.random(2000) >= miss, rng.random(2000) < 0.15).astype(float)
            human = rng.random(2000) < 0.10
            cohorts.append((y[human].astype(float), f[human], f[~human]))
        d = ppi_difference(*cohorts)
        covered += d.low <= 0.10 <= d.high
        ta, va, _ = ppi_parts(*cohorts[0])
        tb, vb, _ = ppi_parts(*cohorts[1])
        shown = min(1.0, max(0.0, tb)) - min(1.0, max(0.0, ta))  # the shares as ppi_mean shows them
        assert d.value == pytest.approx(shown) and d.high - d.value == pytest.approx(1.959964 * math.sqrt(va + vb))
    assert 0.92 <= covered / trials <= 0.98


def test_a_cohort_with_fewer_than_two_human_labels_has_no_corrected_difference():
    one = (np.array([1.0]), np.array([1.0]), np.array([0.0, 1.0]))
    two = (np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    d = ppi_difference(one, two)
    assert d.value is None and "cohort A has 1 human-labelled traces" in d.undefined


def test_the_detectable_change_is_the_smaller_of_a_rise_and_a_fall():
    for share in (0.8, 0.1, 0.5):
        rise = minimum_detectable_difference(share, 40, 40)
        fall = minimum_detectable_difference(1 - share, 40, 40)  # a fall from p is a rise from 1 - p
        assert minimum_detectable_change(share, 40, 40) == pytest.approx(min(rise, fall))
    assert minimum_detectable_change(0.1, 40, 40) < 0.1  # down to about none: the arcsine scale
    assert minimum_detectable_change(0.5, 1, 1) is None


def test_a_corrected_share_past_zero_is_shown_and_compared_as_zero():
    # the humans say none of the judge's three "present" is right: the estimate is 0 - 1 = -1
    below = (np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.0, 0.0, 0.0]))
    zero = (np.array([0.0, 0.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0, 0.0]))
    assert ppi_parts(*below)[0] == pytest.approx(-1.0)
    d = ppi_difference(below, zero)
    assert d.value == 0.0  # 0% against 0%, not +100 points
