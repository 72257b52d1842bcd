"""The pure analytics module against hand-worked cases (no database)."""

from __future__ import annotations

import math
from math import comb

import numpy as np
import pytest

from annotations.analytics import stats as analytics

nan = np.nan
X = np.array(
    [
        [1, 0, 1],
        [1, 1, 0],
        [0, 0, 1],
        [0, 0, 0],
    ],
    dtype=float,
)
CODES = ["1.1", "1.2", "2.1"]


def test_share_of_failures_counts_present_labels_over_all_failures():
    dist = analytics.mode_distribution(X, CODES)
    assert [d.share_of_failures for d in dist] == pytest.approx([2 / 5, 1 / 5, 2 / 5])


def test_share_of_traces_uses_only_traces_where_the_mode_is_known():
    Y = X.copy()
    Y[3, 1] = nan  # not labelled
    dist = analytics.mode_distribution(Y, CODES)
    assert [d.share_of_traces for d in dist] == pytest.approx([2 / 4, 1 / 3, 2 / 4])
    assert [d.known for d in dist] == [4, 3, 4]


def test_share_of_failures_is_undefined_without_failures():
    dist = analytics.mode_distribution(np.zeros((3, 2)), ["a", "b"])
    assert all(math.isnan(d.share_of_failures) for d in dist)
    assert [d.share_of_traces for d in dist] == [0, 0]


def test_phi_matches_the_two_by_two_formula():
    phi = analytics.phi_matrix(X)
    # modes 1.1 and 1.2: a=1 (both), b=1, c=0, d=2 -> (ad - bc) / sqrt((a+b)(c+d)(a+c)(b+d)) = 2 / sqrt(12)
    assert phi[0, 1] == pytest.approx(2 / math.sqrt(12))
    assert phi[1, 0] == pytest.approx(phi[0, 1])
    # modes 1.1 and 2.1: a=1, b=1, c=1, d=1 -> 0
    assert phi[0, 2] == pytest.approx(0.0)
    assert phi[0, 0] == pytest.approx(1.0)


def test_phi_uses_pairwise_complete_rows():
    Y = np.vstack([X, [[1, nan, 0]]])
    full = analytics.phi_matrix(Y)
    assert full[0, 1] == pytest.approx(2 / math.sqrt(12))  # the extra row lacks 1.2
    assert full[0, 2] == pytest.approx(np.corrcoef(Y[:, 0], Y[:, 2])[0, 1])


def test_phi_with_a_constant_mode_is_undefined_not_zero():
    Y = X.copy()
    Y[:, 1] = 0
    phi = analytics.phi_matrix(Y)
    assert math.isnan(phi[0, 1]) and math.isnan(phi[1, 1])


def test_phi_agrees_with_numpy_on_random_complete_data():
    rng = np.random.default_rng(7)
    Y = (rng.random((200, 6)) < 0.3).astype(float)
    assert analytics.phi_matrix(Y) == pytest.approx(np.corrcoef(Y, rowvar=False))


def test_category_matrix_is_present_if_any_mode_present_and_absent_only_if_all_known():
    Y = np.array([[1, nan, 0], [0, nan, 0], [0, 0, 0]], dtype=float)
    C = analytics.category_matrix(Y, ["1", "1", "2"], ["1", "2"])
    assert C[0].tolist() == [1, 0]
    assert math.isnan(C[1, 0]) and C[1, 1] == 0
    assert C[2].tolist() == [0, 0]


def test_per_group_failures_per_system_and_failure_rate():
    groups = np.array(["A", "A", "B", "B"], dtype=object)
    out = {g["group"]: g for g in analytics.per_group(X, groups, ["1", "1", "2"], ["1", "2"])}
    assert out["A"]["failures"] == 4 and out["A"]["by_category"] == {"1": 3, "2": 1}
    assert out["A"]["failure_rate"] == 1.0
    assert out["B"]["failures"] == 1 and out["B"]["failure_rate"] == 0.5
    assert out["B"]["failures_per_trace"] == 0.5


def _fisher_two_sided(a, b, c, d):
    """Hand-rolled hypergeometric two-sided p: sum of tables as or less likely than the observed."""
    r1, c1, n = a + b, a + c, a + b + c + d

    def prob(x):
        return comb(c1, x) * comb(n - c1, r1 - x) / comb(n, r1)

    p_obs = prob(a)
    lo, hi = max(0, r1 + c1 - n), min(r1, c1)
    return sum(prob(x) for x in range(lo, hi + 1) if prob(x) <= p_obs * (1 + 1e-7))


def test_cohort_fisher_p_matches_the_hypergeometric_sum():
    A = np.array([[1]] * 8 + [[0]] * 2, dtype=float)
    B = np.array([[1]] * 1 + [[0]] * 9, dtype=float)
    row = analytics.cohort_compare(A, B, ["1.1"])[0]
    assert (row.a_present, row.a_known, row.b_present, row.b_known) == (8, 10, 1, 10)
    assert row.a_rate == 0.8 and row.b_rate == 0.1
    assert row.p_value == pytest.approx(_fisher_two_sided(8, 2, 1, 9))


def test_holm_correction_by_hand():
    # Holm: sort p ascending, multiply the i-th (0-based) by (m - i), keep the running max, cap at 1
    A = np.array([[1, 1, 0]] * 8 + [[0, 0, 0]] * 2, dtype=float)
    B = np.array([[0, 1, 0]] * 3 + [[0, 0, 0]] * 7, dtype=float)
    rows = analytics.cohort_compare(A, B, ["x", "y", "z"], correction="holm")
    p = [r.p_value for r in rows]
    assert p[2] == 1.0  # never present in either slice: nothing to tell apart, but still tested
    expected = [0.0] * 3
    running = 0.0
    for rank, i in enumerate(sorted(range(3), key=lambda i: p[i])):
        running = max(running, min(1.0, p[i] * (3 - rank)))
        expected[i] = running
    assert [r.p_corrected for r in rows] == pytest.approx(expected)
    assert [r.significant for r in rows] == [expected[0] < 0.05, expected[1] < 0.05, False]


def test_modes_without_labels_in_a_slice_are_left_out_of_the_correction():
    A = np.array([[1, nan]] * 8 + [[0, nan]] * 2, dtype=float)
    B = np.array([[0, 1]] * 3 + [[0, 0]] * 7, dtype=float)
    rows = analytics.cohort_compare(A, B, ["x", "y"], correction="holm")
    assert math.isnan(rows[1].p_value) and math.isnan(rows[1].p_corrected)
    assert rows[0].p_corrected == pytest.approx(rows[0].p_value)


def test_benjamini_hochberg_correction_by_hand():
    A = np.array([[1, 1]] * 8 + [[0, 0]] * 2, dtype=float)
    B = np.array([[0, 1]] * 3 + [[0, 0]] * 7, dtype=float)
    rows = analytics.cohort_compare(A, B, ["x", "y"], correction="bh")
    p = sorted([rows[0].p_value, rows[1].p_value])
    bh_small = min(p[0] * 2 / 1, p[1])
    got = sorted([rows[0].p_corrected, rows[1].p_corrected])
    assert got == pytest.approx([bh_small, p[1]])


def test_significance_markers():
    assert [analytics.significance_marker(p) for p in (0.0005, 0.005, 0.03, 0.2, nan)] == ["***", "**", "*", "", ""]


def test_efficiency_means_per_framework_beside_failure_and_success_rates():
    groups = np.array(["A", "A", "B"], dtype=object)
    out = analytics.efficiency(
        groups,
        np.array([10.0, 20, 5]),
        np.array([2.0, 4, 1]),
        np.array([0.0, 2, 0]),
        np.array([1.0, 0, 1]),
        np.array([1.0, nan, 0]),
    )
    a = out[0]
    assert (a["group"], a["mean_steps"], a["mean_switches"], a["mean_repeated"]) == ("A", 15, 3, 1)
    assert a["failure_rate"] == 0.5 and a["success_rate"] == 1.0 and a["outcomes_known"] == 1


@pytest.mark.parametrize("method", ["holm", "fdr_bh"])
def test_p_adjust_matches_statsmodels_on_random_p_values(method):
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for size in (1, 2, 5, 14, 40):
        p = rng.random(size) ** 3
        p[rng.random(size) < 0.2] = p[0]  # ties
        assert analytics.p_adjust(p, method) == pytest.approx(multipletests(p, method=method)[1])
