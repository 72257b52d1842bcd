"""Table 2 statistics: point values against scikit-learn, F1's undefined case, the intervals."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, precision_score, recall_score

from annotations.judge.comparison_stats import MIN_RELIABLE, compare


def test_point_values_match_scikit_learn_on_random_labels():
    rng = np.random.default_rng(1)
    ref = (rng.random((60, 5)) < 0.3).astype(float)
    lab = np.where(rng.random((60, 5)) < 0.8, ref, 1 - ref)
    ref[rng.random((60, 5)) < 0.1] = np.nan  # some units unlabelled
    out = compare(ref, lab, n_boot=200)
    for m in range(5):
        keep = ~np.isnan(ref[:, m])
        y, p = ref[keep, m].astype(int), lab[keep, m].astype(int)
        row = out["modes"][m]
        assert row["accuracy"].value == pytest.approx(accuracy_score(y, p))
        assert row["precision"].value == pytest.approx(precision_score(y, p))
        assert row["recall"].value == pytest.approx(recall_score(y, p))
        assert row["f1"].value == pytest.approx(f1_score(y, p))
        assert row["kappa"].value == pytest.approx(cohen_kappa_score(y, p))
        assert row["kappa"].low <= row["kappa"].value <= row["kappa"].high
    keep = ~np.isnan(ref)
    assert out["pooled"]["kappa"].value == pytest.approx(
        cohen_kappa_score(ref[keep].astype(int), lab[keep].astype(int))
    )


def test_f1_is_zero_when_the_judge_misses_everything_the_humans_found():
    ref = np.array([[1.0]] * 10 + [[0.0]] * 10)
    lab = np.zeros((20, 1))
    row = compare(ref, lab, n_boot=50)["modes"][0]
    assert row["f1"].value == 0.0 and row["f1"].undefined is None
    assert row["precision"].value is None  # the judge never said present


def test_f1_is_undefined_only_when_nobody_said_present():
    row = compare(np.zeros((5, 1)), np.zeros((5, 1)), n_boot=50)["modes"][0]
    assert row["f1"].value is None and row["f1"].undefined == "nobody said present"
    assert row["kappa"].value is None


def test_small_samples_are_flagged_unreliable():
    rng = np.random.default_rng(2)
    small = compare((rng.random((5, 2)) < 0.5).astype(float), (rng.random((5, 2)) < 0.5).astype(float), n_boot=50)
    assert small["pooled"]["reliable"] is False and small["modes"][0]["reliable"] is False
    big = compare(np.ones((MIN_RELIABLE, 1)), np.ones((MIN_RELIABLE, 1)), n_boot=50)
    assert big["modes"][0]["reliable"] is True


def test_the_same_seed_gives_the_same_intervals():
    rng = np.random.default_rng(4)
    ref = (rng.random((30, 3)) < 0.4).astype(float)
    lab = (rng.random((30, 3)) < 0.4).astype(float)
    a, b = compare(ref, lab, seed=9), compare(ref, lab, seed=9)
    assert a["pooled"]["kappa"] == b["pooled"]["kappa"]
