"""Tests for annotations.rounds.agreement and agreement_report: textbook cases, undefined cases, and the reference
libraries (scikit-learn, statsmodels, krippendorff) as the oracle on random data."""

import itertools
import json
import warnings

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from annotations.rounds import agreement as ag
from annotations.rounds import agreement_report as ar

MODES = [
    "1.1",
    "1.2",
    "1.3",
    "1.4",
    "1.5",
    "2.1",
    "2.2",
    "2.3",
    "2.4",
    "2.5",
    "2.6",
    "3.1",
    "3.2",
    "3.3",
]
CATEGORIES = {m: m.split(".")[0] for m in MODES}
SEEDS = range(8)
PREVALENCES = [0.02, 0.1, 0.3, 0.5]
MISSING = [0.0, 0.15]


# ---------------------------------------------------------------------------------------
# Reference implementations: the libraries where they exist, textbook loops where not
# ---------------------------------------------------------------------------------------


def sk_kappa(a, b):
    """scikit-learn's kappa on the pairs both raters labelled; None where it is NaN (0/0)."""
    keep = ~np.isnan(a) & ~np.isnan(b)
    if not keep.any():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(a[keep], b[keep], labels=[0.0, 1.0])
    return None if np.isnan(value) else value


def sm_fleiss(data):
    """statsmodels' Fleiss kappa of a complete (raters x units) matrix; None where NaN."""
    table, _ = aggregate_raters(data.T.astype(int), n_cat=2)
    with np.errstate(all="ignore"):
        value = sm_fleiss_kappa(table)
    return None if np.isnan(value) else value


def kd_alpha(data):
    """krippendorff's nominal alpha; None where the library refuses or returns NaN."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    except ValueError:  # "There has to be more than one value in the domain."
        return None
    return None if np.isnan(value) else value


def ref_pabak(a, b):
    """Byrt, Bishop & Carlin (1993), two categories: 2 po - 1."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (np.isnan(x) or np.isnan(y))]
    return 2 * sum(x == y for x, y in pairs) / len(pairs) - 1


def ref_ac1_two(a, b):
    """Gwet (2008), two raters, two categories."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (np.isnan(x) or np.isnan(y))]
    n = len(pairs)
    pa = sum(x == y for x, y in pairs) / n
    pi1 = (sum(x for x, _ in pairs) / n + sum(y for _, y in pairs) / n) / 2
    pe = 2 * pi1 * (1 - pi1)
    return (pa - pe) / (1 - pe)


def ref_multi_rater(data):
    """Fleiss' P-bar and kappa and Gwet's AC1 for a (raters x units) 0/1/NaN matrix, as loops.

    Gwet (2008/2014): pa over units with >= 2 ratings, pi_k = mean over units with >= 1
    rating of r_ik / r_i, pe = sum pi_k (1 - pi_k) / (Q - 1). Fleiss: category shares over
    units with >= 2 ratings.
    """
    agree, shares, n_rated, pair_counts = [], [0.0, 0.0], 0, [0, 0]
    for unit in data.T:
        ratings = [int(v) for v in unit if not np.isnan(v)]
        r = len(ratings)
        counts = [ratings.count(0), ratings.count(1)]
        if r >= 1:
            n_rated += 1
            shares = [s + c / r for s, c in zip(shares, counts, strict=True)]
        if r >= 2:
            agree.append(sum(c * (c - 1) for c in counts) / (r * (r - 1)))
            pair_counts = [p + c for p, c in zip(pair_counts, counts, strict=True)]
    pa = sum(agree) / len(agree)
    pi = [s / n_rated for s in shares]
    pe_gwet = sum(p * (1 - p) for p in pi)
    total = sum(pair_counts)
    pe_fleiss = sum((c / total) ** 2 for c in pair_counts)
    fleiss = None if pe_fleiss == 1 else (pa - pe_fleiss) / (1 - pe_fleiss)
    return {"pa": pa, "fleiss": fleiss, "ac1": (pa - pe_gwet) / (1 - pe_gwet)}


def random_labels(seed, prevalence, missing, shape=(4, 120)):
    """Correlated raters: each copies a latent truth with probability 0.8."""
    rng = np.random.default_rng(seed)
    truth = rng.random(shape[1:]) < prevalence
    own = rng.random(shape) < prevalence
    labels = np.where(rng.random(shape) < 0.8, truth, own).astype(float)
    labels[rng.random(shape) < missing] = np.nan
    return labels


def round_labels(seed, n_traces=60, missing=0.1):
    """(4, T, 14) labels with realistic per-mode prevalences 2-30%."""
    rng = np.random.default_rng(seed)
    prev = rng.uniform(0.02, 0.3, len(MODES))
    return random_labels(seed, prev, missing, shape=(4, n_traces, len(MODES)))


def value(stat):
    return stat["value"]


def assert_matches(stat, expected):
    if expected is None:
        assert stat["value"] is None and stat["undefined"]
    else:
        assert stat["undefined"] is None
        assert stat["value"] == pytest.approx(expected, abs=1e-10)


# ---------------------------------------------------------------------------------------
# Textbook cases
# ---------------------------------------------------------------------------------------


def wikipedia_2x2():
    """Cohen's kappa article: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no; kappa = 0.4."""
    a = np.array([1] * 20 + [1] * 5 + [0] * 10 + [0] * 15, float)
    b = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15, float)
    return a, b


def test_cohen_kappa_textbook_2x2():
    assert value(ag.cohen_kappa(*wikipedia_2x2())) == pytest.approx(0.4)


def test_percent_agreement_and_pabak_textbook_2x2():
    a, b = wikipedia_2x2()
    assert value(ag.percent_agreement(a, b)) == pytest.approx(0.7)
    assert value(ag.pabak(a, b)) == pytest.approx(0.4)


def test_gwet_ac1_textbook_2x2():
    # pi = (25/50 + 30/50) / 2 = 0.55, pe = 2 * 0.55 * 0.45 = 0.495
    assert value(ag.gwet_ac1(*wikipedia_2x2())) == pytest.approx((0.7 - 0.495) / (1 - 0.495))


def test_fleiss_kappa_textbook_table():
    # Fleiss' kappa article on Wikipedia: 10 subjects, 14 raters, 5 categories, kappa 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert value(ag.fleiss_kappa(table)) == pytest.approx(0.20993, abs=1e-5)


def test_krippendorff_alpha_textbook_with_missing():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", nominal: 0.743.
    nan = np.nan
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
    assert value(ag.krippendorff_alpha_nominal(data)) == pytest.approx(0.743, abs=5e-4)


# ---------------------------------------------------------------------------------------
# Undefined cases: None plus a reason, never a silent 0 or 1 and never an exception
# ---------------------------------------------------------------------------------------


def test_kappa_undefined_when_both_raters_give_the_same_constant_answer():
    stat = ag.cohen_kappa([0, 0, 0, 0], [0, 0, 0, 0])
    assert stat["value"] is None
    assert "same answer on every unit" in stat["undefined"]


def test_kappa_is_zero_when_raters_are_constant_but_opposite():
    # pe = 0 here, so kappa = (0 - 0) / 1 = 0 is defined (scikit-learn agrees).
    assert ag.cohen_kappa([1, 1, 1], [0, 0, 0]) == {"value": 0.0, "undefined": None}


@pytest.mark.parametrize("fn", [ag.cohen_kappa, ag.percent_agreement, ag.pabak, ag.gwet_ac1])
def test_two_rater_statistics_undefined_without_units(fn):
    assert fn([], [])["undefined"] == "no unit was labelled by both raters"


@pytest.mark.parametrize("fn", [ag.cohen_kappa, ag.percent_agreement, ag.pabak, ag.gwet_ac1])
def test_two_rater_statistics_undefined_when_no_unit_has_both_labels(fn):
    nan = np.nan
    stat = fn([1, nan, 0, nan], [nan, 1, nan, nan])
    assert stat["value"] is None and stat["undefined"]


def test_fleiss_kappa_undefined_when_every_rating_is_in_one_category():
    stat = ag.fleiss_kappa([[0, 3], [0, 3], [0, 3]])
    assert stat["value"] is None
    assert "same category" in stat["undefined"]


@pytest.mark.parametrize(
    "fn",
    [ag.fleiss_kappa, ag.gwet_ac1_multi, ag.percent_agreement_multi, ag.pabak_multi],
)
def test_multi_rater_statistics_undefined_without_pairable_units(fn):
    stat = fn([[1, 0], [0, 1], [0, 0]])  # no unit has two ratings
    assert stat["value"] is None
    assert stat["undefined"] == "no unit was labelled by two or more raters"


def test_krippendorff_alpha_undefined_when_only_one_value_occurs():
    stat = ag.krippendorff_alpha_nominal([[0, 0, 0], [0, 0, 0]])
    assert stat["value"] is None
    assert "only one value" in stat["undefined"]


def test_krippendorff_alpha_undefined_when_all_missing():
    stat = ag.krippendorff_alpha_nominal(np.full((3, 5), np.nan))
    assert stat["value"] is None and stat["undefined"]


def test_prevalence_undefined_when_all_missing():
    assert ag.prevalence(np.full((2, 3), np.nan))["undefined"] == "there is no non-missing rating"


def test_pairwise_kappa_matrix_marks_undefined_pairs_nan():
    labels = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0]], float)
    matrix = ag.pairwise_kappa_matrix(labels)
    assert np.isnan(matrix[0, 1]) and np.isnan(matrix[1, 0])
    assert matrix[0, 2] == 0.0
    assert np.all(np.diag(matrix) == 1.0)


def test_labels_other_than_zero_one_or_nan_are_rejected():
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        ag.cohen_kappa([0, 2], [0, 1])


# ---------------------------------------------------------------------------------------
# Random data against the reference libraries
# ---------------------------------------------------------------------------------------

RANDOM_CASES = list(itertools.product(SEEDS, PREVALENCES, MISSING))


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_cohen_kappa_matches_sklearn(seed, prev, missing):
    labels = random_labels(seed, prev, missing)
    for i, j in itertools.combinations(range(len(labels)), 2):
        assert_matches(ag.cohen_kappa(labels[i], labels[j]), sk_kappa(labels[i], labels[j]))


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_pairwise_kappa_matrix_matches_sklearn(seed, prev, missing):
    labels = random_labels(seed, prev, missing, shape=(3, 40, 5))
    matrix = ag.pairwise_kappa_matrix(labels)
    flat = labels.reshape(3, -1)
    for i, j in itertools.permutations(range(3), 2):
        expected = sk_kappa(flat[i], flat[j])
        if expected is None:
            assert np.isnan(matrix[i, j])
        else:
            assert matrix[i, j] == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_pabak_and_ac1_match_textbook_formulas(seed, prev, missing):
    labels = random_labels(seed, prev, missing)
    a, b = labels[0], labels[1]
    assert value(ag.pabak(a, b)) == pytest.approx(ref_pabak(a, b), abs=1e-12)
    assert value(ag.gwet_ac1(a, b)) == pytest.approx(ref_ac1_two(a, b), abs=1e-12)


@pytest.mark.parametrize(("seed", "prev"), itertools.product(SEEDS, PREVALENCES))
def test_fleiss_kappa_matches_statsmodels_on_complete_data(seed, prev):
    labels = random_labels(seed, prev, 0.0)
    table, _ = aggregate_raters(labels.T.astype(int), n_cat=2)
    np.testing.assert_array_equal(ag.rating_counts(labels), table)
    assert_matches(ag.fleiss_kappa(table), sm_fleiss(labels))


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_multi_rater_statistics_match_textbook_formulas(seed, prev, missing):
    labels = random_labels(seed, prev, missing)
    counts = ag.rating_counts(labels)
    expected = ref_multi_rater(labels)
    assert value(ag.percent_agreement_multi(counts)) == pytest.approx(expected["pa"], abs=1e-12)
    assert value(ag.pabak_multi(counts)) == pytest.approx(2 * expected["pa"] - 1, abs=1e-12)
    assert value(ag.gwet_ac1_multi(counts)) == pytest.approx(expected["ac1"], abs=1e-12)
    assert_matches(ag.fleiss_kappa(counts), expected["fleiss"])


def test_two_and_multi_rater_ac1_agree_for_two_complete_raters():
    labels = random_labels(3, 0.2, 0.0, shape=(2, 200))
    assert value(ag.gwet_ac1_multi(ag.rating_counts(labels))) == pytest.approx(value(ag.gwet_ac1(*labels)))


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_krippendorff_alpha_matches_library(seed, prev, missing):
    labels = random_labels(seed, prev, missing)
    assert_matches(ag.krippendorff_alpha_nominal(labels), kd_alpha(labels))


@pytest.mark.parametrize("seed", SEEDS)
def test_krippendorff_alpha_matches_library_on_many_categories(seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 4, size=(5, 30)).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    assert_matches(ag.krippendorff_alpha_nominal(data), kd_alpha(data))


@pytest.mark.parametrize(("seed", "prev", "missing"), RANDOM_CASES)
def test_prevalence_is_share_of_present_among_labelled(seed, prev, missing):
    labels = random_labels(seed, prev, missing)
    assert value(ag.prevalence(labels)) == pytest.approx(np.nanmean(labels))


# ---------------------------------------------------------------------------------------
# Categories
# ---------------------------------------------------------------------------------------


def test_category_labels_follow_any_present_else_absent_else_missing():
    nan = np.nan
    modes = ["1.1", "1.2", "2.1"]
    cats = {"1.1": "1", "1.2": "1", "2.1": "2"}
    # one rater, four traces
    labels = np.array([[[1, nan, 0], [0, nan, nan], [nan, nan, 1], [0, 0, 0]]], float)
    out = ag.category_labels(labels, modes, cats)
    expected = np.array([[[1, 0], [0, nan], [nan, 1], [0, 0]]], float)
    np.testing.assert_array_equal(out, expected)
    assert ag.category_codes(modes, cats) == ["1", "2"]


# ---------------------------------------------------------------------------------------
# round_report: point estimates against the libraries
# ---------------------------------------------------------------------------------------


def report(labels, **kwargs):
    kwargs.setdefault("n_boot", 50)
    return ar.round_report(
        labels,
        raters=["h1", "h2", "h3", "llm"],
        modes=MODES,
        categories=CATEGORIES,
        **kwargs,
    )


def mean_sk_kappa(units):
    """units: (R, n) labels; mean of the defined pairwise scikit-learn kappas."""
    kappas = [sk_kappa(units[i], units[j]) for i, j in itertools.combinations(range(len(units)), 2)]
    defined = [k for k in kappas if k is not None]
    return sum(defined) / len(defined) if defined else None


@pytest.mark.parametrize("seed", SEEDS)
def test_round_report_per_mode_matches_libraries(seed):
    labels = round_labels(seed)
    rep = report(labels)
    for j, row in enumerate(rep["per_mode"]):
        units = labels[:, :, j]
        assert row["mode"] == MODES[j] and row["category"] == CATEGORIES[MODES[j]]
        assert_matches(row["mean_pairwise_kappa"], mean_sk_kappa(units))
        assert_matches(row["krippendorff_alpha"], kd_alpha(units))
        ref = ref_multi_rater(units)
        assert_matches(row["fleiss_kappa"], ref["fleiss"])
        assert_matches(row["gwet_ac1"], ref["ac1"])
        assert_matches(row["percent_agreement"], ref["pa"])
        for pair, (i, k) in zip(row["pairwise"], itertools.combinations(range(4), 2), strict=True):
            assert_matches(pair["kappa"], sk_kappa(units[i], units[k]))


@pytest.mark.parametrize("seed", SEEDS)
def test_round_report_fleiss_matches_statsmodels_without_missing(seed):
    labels = round_labels(seed, missing=0.0)
    rep = report(labels)
    for j, row in enumerate(rep["per_mode"]):
        assert_matches(row["fleiss_kappa"], sm_fleiss(labels[:, :, j]))
    assert_matches(rep["overall"]["fleiss_kappa"], sm_fleiss(labels.reshape(4, -1)))


@pytest.mark.parametrize("seed", SEEDS)
def test_round_report_per_category_uses_category_labels(seed):
    labels = round_labels(seed)
    rep = report(labels)
    cat_labels = ag.category_labels(labels, MODES, CATEGORIES)
    assert [row["category"] for row in rep["per_category"]] == ["1", "2", "3"]
    for k, row in enumerate(rep["per_category"]):
        units = cat_labels[:, :, k]
        assert_matches(row["mean_pairwise_kappa"], mean_sk_kappa(units))
        assert_matches(row["krippendorff_alpha"], kd_alpha(units))
        assert_matches(row["prevalence"], np.nanmean(units))


@pytest.mark.parametrize("seed", SEEDS)
def test_round_report_overall_pools_all_trace_mode_units(seed):
    labels = round_labels(seed)
    rep = report(labels)
    flat = labels.reshape(4, -1)
    overall = rep["overall"]
    assert_matches(overall["mean_pairwise_kappa"], mean_sk_kappa(flat))
    assert rep["mean_pairwise_kappa"] == overall["mean_pairwise_kappa"]
    assert_matches(overall["krippendorff_alpha"], kd_alpha(flat))
    ref = ref_multi_rater(flat)
    assert_matches(overall["gwet_ac1"], ref["ac1"])
    assert_matches(overall["pabak"], 2 * ref["pa"] - 1)
    matrix = ag.pairwise_kappa_matrix(labels)
    for pair, (i, k) in zip(rep["pairwise"], itertools.combinations(range(4), 2), strict=True):
        assert (pair["a"], pair["b"]) == (rep["raters"][i], rep["raters"][k])
        assert_matches(pair["kappa"], sk_kappa(flat[i], flat[k]))
        assert rep["kappa_matrix"][i][k] == rep["kappa_matrix"][k][i] == pytest.approx(matrix[i, k])
        assert pair["n_units"] == int((~np.isnan(flat[i]) & ~np.isnan(flat[k])).sum())
    assert all(rep["kappa_matrix"][i][i] == 1.0 for i in range(4))


def test_round_report_reports_an_undefined_kappa_for_a_mode_nobody_saw():
    labels = round_labels(0, missing=0.0)
    labels[:, :, 3] = 0.0
    row = report(labels)["per_mode"][3]
    assert row["mean_pairwise_kappa"]["value"] is None
    assert row["mean_pairwise_kappa"]["undefined"] == "Cohen's kappa is undefined for every pair of raters"
    assert row["mean_pairwise_kappa"]["ci"] is None
    assert row["fleiss_kappa"]["value"] is None and row["fleiss_kappa"]["undefined"]
    assert row["pabak"]["value"] == 1.0


# ---------------------------------------------------------------------------------------
# Bootstrap: the vectorised resamples against a slow loop of the libraries
# ---------------------------------------------------------------------------------------


def percentile_ci(replicates, level):
    tail = (1 - level) / 2
    lo, hi = np.quantile([r for r in replicates if r is not None], [tail, 1 - tail])
    return [lo, hi]


def test_bootstrap_indices_are_seeded_and_shaped():
    idx = ar.bootstrap_indices(30, 7, seed=3)
    assert idx.shape == (7, 30) and idx.min() >= 0 and idx.max() < 30
    np.testing.assert_array_equal(idx, ar.bootstrap_indices(30, 7, seed=3))
    assert not np.array_equal(idx, ar.bootstrap_indices(30, 7, seed=4))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_ci_of_mean_kappa_matches_sklearn_loop(seed):
    labels = round_labels(seed, n_traces=40)
    n_boot = 200
    rep = report(labels, n_boot=n_boot, seed=seed, ci=0.9)
    replicates = [mean_sk_kappa(labels[:, idx].reshape(4, -1)) for idx in ar.bootstrap_indices(40, n_boot, seed)]
    stat = rep["overall"]["mean_pairwise_kappa"]
    assert stat["n_boot_defined"] == sum(r is not None for r in replicates)
    assert stat["ci"] == pytest.approx(percentile_ci(replicates, 0.9), abs=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_ci_of_pair_kappa_matches_sklearn_loop(seed):
    labels = round_labels(seed, n_traces=40)
    rep = report(labels, n_boot=100, seed=seed)
    flat_resamples = [labels[:, idx].reshape(4, -1) for idx in ar.bootstrap_indices(40, 100, seed)]
    for pair, (i, k) in zip(rep["pairwise"], itertools.combinations(range(4), 2), strict=True):
        replicates = [sk_kappa(units[i], units[k]) for units in flat_resamples]
        assert pair["kappa"]["ci"] == pytest.approx(percentile_ci(replicates, 0.95), abs=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_ci_of_fleiss_and_alpha_matches_libraries(seed):
    labels = round_labels(seed, n_traces=50, missing=0.0)
    labels[:, :, 0] = random_labels(seed, 0.4, 0.0, shape=(4, 50))  # a common mode: CIs defined
    rep = report(labels, n_boot=100, seed=seed)
    resamples = [labels[:, idx, 0] for idx in ar.bootstrap_indices(50, 100, seed)]
    row = rep["per_mode"][0]
    assert row["fleiss_kappa"]["ci"] == pytest.approx(percentile_ci([sm_fleiss(u) for u in resamples], 0.95), abs=1e-10)
    assert row["krippendorff_alpha"]["ci"] == pytest.approx(
        percentile_ci([kd_alpha(u) for u in resamples], 0.95), abs=1e-10
    )


def test_bootstrap_ci_of_alpha_with_missing_matches_library():
    labels = round_labels(5, n_traces=50, missing=0.2)
    rep = report(labels, n_boot=100, seed=5)
    resamples = [labels[:, idx].reshape(4, -1) for idx in ar.bootstrap_indices(50, 100, 5)]
    expected = percentile_ci([kd_alpha(u) for u in resamples], 0.95)
    assert rep["overall"]["krippendorff_alpha"]["ci"] == pytest.approx(expected, abs=1e-10)


def test_ci_is_withheld_when_too_many_resamples_are_undefined():
    labels = np.zeros((4, 40, len(MODES)))
    labels[:, 0, 2] = 1.0  # one trace carries the only positive of mode 1.3
    row = report(labels, n_boot=200)["per_mode"][2]
    fleiss = row["fleiss_kappa"]
    assert fleiss["value"] == pytest.approx(1.0)
    assert fleiss["ci"] is None
    assert "undefined on" in fleiss["ci_undefined"]
    assert fleiss["n_boot_defined"] < 200


def test_same_seed_gives_the_same_report():
    labels = round_labels(2)
    assert report(labels, seed=11) == report(labels, seed=11)


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------


def assert_plain(obj):
    """Only plain JSON types all the way down (np.float64 would slip past json.dumps)."""
    if isinstance(obj, dict):
        assert all(type(k) is str for k in obj)
        for v in obj.values():
            assert_plain(v)
    elif isinstance(obj, list):
        for v in obj:
            assert_plain(v)
    else:
        assert type(obj) in (str, int, float, bool, type(None)), type(obj)


@pytest.mark.parametrize(
    "labels",
    [
        round_labels(0),
        np.zeros((4, 10, len(MODES))),  # all undefined kappas
        np.full((4, 10, len(MODES)), np.nan),  # nothing labelled
        np.zeros((4, 0, len(MODES))),  # no traces
    ],
    ids=["random", "all-absent", "all-missing", "no-traces"],
)
def test_round_report_is_strict_json(labels):
    rep = report(labels)
    json.dumps(rep, allow_nan=False)
    assert_plain(rep)


def test_round_report_with_one_rater_is_undefined_not_an_error():
    rep = ar.round_report(
        round_labels(0)[:1],
        raters=["h1"],
        modes=MODES,
        categories=CATEGORIES,
        n_boot=10,
    )
    json.dumps(rep, allow_nan=False)
    assert rep["pairwise"] == []
    assert rep["mean_pairwise_kappa"]["undefined"] == "there are fewer than two raters"
    assert rep["overall"]["fleiss_kappa"]["undefined"] == "no unit was labelled by two or more raters"
