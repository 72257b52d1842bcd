"""Attribution agreement figures equal the field's libraries on the same data (pure, no database)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotations.rounds.attribution.agreement import attribution_agreement

# Three annotators who attribute differently: 8 traces; None = did not attribute; "none" = no single step.
AGENTS = [
    ["Coder", "Planner", "Coder", "Tester", "Coder", "Planner", "Tester", "Coder"],
    ["Coder", "Coder", "Coder", "Tester", "Planner", "Planner", "Tester", "Tester"],
    ["Planner", "Planner", "Coder", "Coder", "Coder", "Planner", "Tester", "Coder"],
]
STEPS = [
    [3, 1, 7, 10, 4, None, 12, 2],
    [3, 2, 9, 10, 1, None, 12, 6],
    [1, 1, 7, 14, 4, 5, 11, 2],
]
NONE = [[s is None for s in row] for row in STEPS]


def report(**kw):
    return attribution_agreement(agents=AGENTS, steps=STEPS, none=NONE, raters=["ann", "bob", "cat"], **kw)


def test_agent_kappas_equal_scikit_learn_and_statsmodels():
    rep = report(n_boot=0)
    kappas = [cohen_kappa_score(AGENTS[i], AGENTS[j]) for i, j in combinations(range(3), 2)]
    for pair, expected in zip(rep["agent"]["pairs"], kappas, strict=True):
        assert pair["kappa"]["value"] == pytest.approx(expected, abs=1e-12)
    assert rep["agent"]["mean_pairwise_kappa"]["value"] == pytest.approx(np.mean(kappas), abs=1e-12)
    table, _ = aggregate_raters(np.array(AGENTS).T)
    assert rep["agent"]["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
    agree = [np.mean(np.array(AGENTS[i]) == np.array(AGENTS[j])) for i, j in combinations(range(3), 2)]
    assert rep["agent"]["percent_agreement"]["value"] == pytest.approx(np.mean(agree), abs=1e-12)


def test_step_agreement_is_the_hand_count_over_rater_pairs():
    rep = report(n_boot=0)["step"]
    exact = within1 = within3 = units = 0
    dists = []
    for i, j in combinations(range(3), 2):
        for a, b in zip(STEPS[i], STEPS[j], strict=True):
            units += 1
            if a is None or b is None:
                exact += a is None and b is None
                within1 += a is None and b is None
                within3 += a is None and b is None
                continue
            dists.append(abs(a - b))
            exact += a == b
            within1 += abs(a - b) <= 1
            within3 += abs(a - b) <= 3
    assert rep["n_units"] == units == 24
    assert rep["exact"]["value"] == pytest.approx(exact / units)
    assert rep["within_1"]["value"] == pytest.approx(within1 / units)
    assert rep["within_3"]["value"] == pytest.approx(within3 / units)
    assert rep["mean_abs_distance"]["value"] == pytest.approx(np.mean(dists))


def test_bootstrap_ci_is_the_percentile_interval_of_resampled_traces():
    rep = report(n_boot=200, seed=7)
    rng = np.random.default_rng(7)
    draws = rng.integers(0, 8, size=(200, 8))
    values = []
    for idx in draws:
        a = [[row[k] for k in idx] for row in AGENTS]
        ks = [cohen_kappa_score(a[i], a[j]) for i, j in combinations(range(3), 2)]
        ks = [k for k in ks if not np.isnan(k)]
        if ks:
            values.append(np.mean(ks))
    lo, hi = rep["agent"]["mean_pairwise_kappa"]["ci"]
    assert lo <= rep["agent"]["mean_pairwise_kappa"]["value"] <= hi
    # sklearn gives NaN (with a warning) where chance agreement is 1; both skip those resamples.
    assert [lo, hi] == pytest.approx(list(np.quantile(values, [0.025, 0.975])), abs=1e-9)


def test_kappa_is_undefined_not_zero_when_everyone_names_the_same_agent():
    rep = attribution_agreement(
        agents=[["A", "A"], ["A", "A"]], steps=[[1, 2], [1, 2]], none=[[False] * 2] * 2, raters=["x", "y"], n_boot=0
    )
    assert rep["agent"]["mean_pairwise_kappa"]["value"] is None
    assert "chance agreement is 1" in rep["agent"]["pairs"][0]["kappa"]["undefined"]
    assert rep["agent"]["percent_agreement"]["value"] == 1.0
    assert rep["step"]["exact"]["value"] == 1.0


def test_unattributed_traces_are_left_out_of_a_pair():
    rep = attribution_agreement(
        agents=[["A", None, "B"], ["A", "B", "B"]],
        steps=[[1, None, 4], [1, 2, 5]],
        none=[[False] * 3] * 2,
        raters=["x", "y"],
        n_boot=0,
    )
    assert rep["agent"]["pairs"][0]["n"] == 2
    assert rep["step"]["n_units"] == 2
    assert rep["step"]["within_1"]["value"] == 1.0
    assert rep["step"]["exact"]["value"] == 0.5
