"""providers/baseline_model.py: TF-IDF + logistic regression per mode, honest held-out kappa (pure, real data)."""

import json

import numpy as np
import pytest

from annotations.judge.providers import baseline_model


def synthetic(n=80, seed=0):
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        a = rng.random() < 0.4
        words = ["agent", "message", "plan", "code"] * 5
        if a:
            words += ["traceback", "exception", "failed"]
        texts.append(" ".join(rng.permutation(words)) + f" run{i}")
        labels.append([float(a), 0.0])
    return texts, np.array(labels)


def test_learns_a_keyword_signal_with_high_held_out_kappa():
    texts, y = synthetic()
    model = baseline_model.train(texts, y, ["A", "B"])
    rep = {r.code: r for r in model.reports}
    assert rep["A"].kappa is not None and rep["A"].kappa > 0.8
    assert rep["A"].n_test > 0
    p = model.predict_proba(["agent plan code failed with a traceback exception", "agent message plan code message"])
    assert p[0, 0] > 0.5 > p[1, 0]


def test_mode_never_present_has_no_kappa_and_says_why():
    texts, y = synthetic()
    model = baseline_model.train(texts, y, ["A", "B"])
    rep = {r.code: r for r in model.reports}
    assert rep["B"].kappa is None and "undefined" in rep["B"].undefined
    assert model.predict_proba(["anything"])[0, 1] == 0.0


def test_mode_with_too_few_positives_gets_no_held_out_figure():
    texts, y = synthetic()
    y[:, 1] = 0
    y[:2, 1] = 1
    model = baseline_model.train(texts, y, ["A", "B"])
    rep = {r.code: r for r in model.reports}
    assert rep["B"].kappa is None and "need at least" in rep["B"].undefined


def test_unlabelled_cells_are_left_out_of_training():
    texts, y = synthetic()
    y[::3, 0] = np.nan
    model = baseline_model.train(texts, y, ["A", "B"])
    r = model.reports[0]
    assert r.n_positive + r.n_negative == int((~np.isnan(y[:, 0])).sum())


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="labels must be"):
        baseline_model.train(["a", "b"], np.zeros((3, 1)), ["A"])


def _mad_records(shared_dir):
    texts, rows = [], []
    for name in ("ag2", "appworld", "metagpt", "openmanus"):
        for rec in json.loads((shared_dir / "mast" / "mad_thirdparty_derived" / f"{name}_output_mad.json").read_text()):
            texts.append("\n".join(str(s.get("content", "")) for s in rec["steps"]))
            rows.append(rec["metadata"]["mast_annotation"])
    codes = sorted(rows[0])
    return texts, np.array([[float(r.get(c, np.nan)) for c in codes] for r in rows]), codes


def test_baseline_on_real_mast_data_reports_held_out_kappa_per_mode(shared_dir):
    texts, y, codes = _mad_records(shared_dir)
    model = baseline_model.train(texts, y, codes)
    defined = [r for r in model.reports if r.kappa is not None]
    assert len(model.reports) == len(codes) == 14
    assert defined, "at least one mode has enough positives for a held-out kappa"
    assert all(-1 <= r.kappa <= 1 for r in defined)
    for r in model.reports:
        assert (r.kappa is None) == (r.undefined is not None and r.kappa is None)
    print(
        "held-out kappa per mode:",
        {r.code: (round(r.kappa, 2) if r.kappa is not None else None) for r in model.reports},
    )


def test_baseline_on_the_human_labelled_file_is_undefined_for_rare_modes(shared_dir):
    records = json.loads((shared_dir / "mast" / "human_annotations" / "mad_human_labelled_19records.json").read_text())
    codes = sorted({a["failure mode"].split()[0] for r in records for a in r["annotations"]})
    texts, rows = [], []
    for r in records:
        texts.append(r["trace"] if isinstance(r["trace"], str) else json.dumps(r["trace"]))
        votes = {a["failure mode"].split()[0]: [a[k] for k in a if k.startswith("annotator")] for a in r["annotations"]}
        # majority of the three annotators = the agreed label of the record
        rows.append([float(sum(bool(v) for v in votes[c]) >= 2) if c in votes else np.nan for c in codes])
    model = baseline_model.train(texts, np.array(rows), codes)
    undefined = [r for r in model.reports if r.kappa is None]
    # 19 traces: most modes have fewer than 4 positives, and the report must say so rather than invent a number
    assert undefined and all(r.undefined for r in undefined)


# ---------------------------------------------------------------- cross-fitting


def memorisable(n=16):
    """Each trace carries a unique token aligned with its label, over words every trace shares:
    a model that saw a trace reproduces its label; one that did not has nothing to go on."""
    texts = [f"agent plan code message review memo{i}" for i in range(n)]
    return texts, np.array([[float(i % 2)] for i in range(n)])


def accuracy(proba, y):
    return float(((proba[:, 0] >= 0.5) == (y[:, 0] == 1)).mean())


def test_memorised_labels_score_perfectly_in_sample_but_not_cross_fitted():
    texts, y = memorisable()
    in_sample = baseline_model.train(texts, y, ["A"]).predict_proba(texts)
    assert accuracy(in_sample, y) == 1.0
    crossed = baseline_model.cross_fit(texts, y, ["A"])
    assert crossed.k == 5 and sorted(np.bincount(crossed.fold)) == [3, 3, 3, 3, 4]
    assert accuracy(crossed.proba, y) < 1.0


def test_each_training_trace_is_predicted_by_a_model_fitted_without_its_fold():
    texts, y = memorisable(12)
    crossed = baseline_model.cross_fit(texts, y, ["A"], seed=3)
    for f in range(crossed.k):
        held = crossed.fold == f
        rest = baseline_model.train([t for t, h in zip(texts, held, strict=True) if not h], y[~held], ["A"], seed=3)
        expected = rest.predict_proba([t for t, h in zip(texts, held, strict=True) if h])
        assert np.allclose(crossed.proba[held], expected)


def test_fewer_traces_than_folds_is_leave_one_out_and_a_constant_fold_says_so():
    texts, y = ["alpha beta", "beta gamma", "gamma delta"], np.array([[1.0], [0.0], [0.0]])
    crossed = baseline_model.cross_fit(texts, y, ["A"])
    assert crossed.k == 3 and sorted(crossed.fold) == [0, 1, 2]
    # the fold holding the only positive trace trains on two absent labels: it can only say absent
    assert crossed.proba[0, 0] == 0.0
    assert crossed.constant_folds["A"] == 1
    assert "1 of 3 folds" in crossed.report()["notes"]["A"]
