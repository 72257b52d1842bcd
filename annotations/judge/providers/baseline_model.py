"""The offline baseline provider: per failure mode, TF-IDF features + logistic regression (pure, no Django).

It is a bag-of-words classifier, not an LLM, and is reported as such. Its quality is measured
honestly on held-out traces: per mode, a stratified split (test share ``TEST_SIZE``), the
classifier fitted on the training part only, Cohen's kappa on the held-out part. A mode with
fewer than ``MIN_CLASS`` positive (or negative) traces gets no held-out figure and says why.

The TF-IDF vocabulary and IDF weights are fitted once on all training texts without labels
(unsupervised, as is usual); only the classifiers see labels, and only of their training split.
The final classifiers are then refitted on every labelled trace.

Its stored answers for its own training traces are cross-fitted (``cross_fit``): the training
traces are dealt into ``K_FOLDS`` folds (a seeded shuffle, round-robin; stratification is not
needed for this purpose), and each fold's traces are predicted by a model (vectorizer and
classifiers) fitted on the other folds only, so no training trace is scored by a model that saw
it or its label. Traces outside the training set are predicted by the model fitted on all.
Fewer training traces than ``K_FOLDS``: one fold per trace (leave-one-out). A mode whose labels
are all one value within a fold's training part (or absent from it) is predicted at that part's
prior (0 or 1; 0 when it has no label), as the full model does for such a mode, and the fold
report counts how often that happened.

As a provider it labels a whole run at once (``per_trace = False``): ``judge/baseline.py``
gathers the labels, trains, and writes every trace's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from annotations.judge.providers.base import Provider, RunConfig
from annotations.rounds.agreement import cohen_kappa, percent_agreement

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

# scikit-learn is imported where a model is trained, not here: this module is loaded with the
# judge's registry by every web and worker process, and scikit-learn (with SciPy) costs about
# 0.7 s and 150 MB at start-up.

TEST_SIZE = 0.3
MIN_CLASS = 4
K_FOLDS = 5
TEXT_CHARS = 40_000  # per trace: the first and last halves; long traces say most at both ends
NAME = "baseline tf-idf+logreg"


def clip_text(text: str, limit: int = TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n" + text[-half:]


@dataclass
class ModeReport:
    code: str
    n_positive: int
    n_negative: int
    n_test: int = 0
    kappa: float | None = None
    accuracy: float | None = None
    undefined: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BaselineModel:
    codes: list[str]
    vectorizer: TfidfVectorizer
    classifiers: dict[str, LogisticRegression | None]
    priors: dict[str, float]
    reports: list[ModeReport] = field(default_factory=list)
    n_train: int = 0

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """(traces x modes) probability that each mode is present."""
        X = self.vectorizer.transform([clip_text(t) for t in texts])
        out = np.zeros((len(texts), len(self.codes)))
        for j, code in enumerate(self.codes):
            clf = self.classifiers.get(code)
            out[:, j] = clf.predict_proba(X)[:, 1] if clf is not None else self.priors[code]
        return out

    def report(self) -> dict[str, Any]:
        return {
            "kind": "baseline",
            "classifier": "TF-IDF (word 1-2 grams) + logistic regression, one per mode",
            "n_train": self.n_train,
            "test_size": TEST_SIZE,
            "modes": [r.as_dict() for r in self.reports],
        }


def _fit(X, y: np.ndarray, seed: int) -> LogisticRegression:
    # scikit-learn loads in about a second: only a process that trains pays for it.
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(class_weight="balanced", max_iter=2000, C=4.0, random_state=seed)
    clf.fit(X, y)
    return clf


def _vectorizer(n: int) -> TfidfVectorizer:
    # scikit-learn loads in about a second: only a process that trains pays for it.
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        max_features=30_000,
        ngram_range=(1, 2),
        sublinear_tf=True,
        min_df=2 if n >= 20 else 1,
        token_pattern=r"(?u)\b[A-Za-z_][A-Za-z0-9_]+\b",  # noqa: S106
        dtype=np.float32,
    )


def _check(texts: Sequence[str], labels: np.ndarray, codes: Sequence[str]) -> np.ndarray:
    labels = np.asarray(labels, dtype=float)
    if labels.shape != (len(texts), len(codes)):
        raise ValueError(f"labels must be {len(texts)} x {len(codes)}, not {labels.shape}")
    if len(texts) < 2:
        raise ValueError(f"need at least 2 labelled traces to train, got {len(texts)}")
    return labels


def _fit_modes(
    X, labels: np.ndarray, codes: Sequence[str], seed: int
) -> tuple[dict[str, LogisticRegression | None], dict[str, float]]:
    """Per mode, a classifier on the traces labelled for it, or None (with its prior) when those
    labels are all one value or there are none."""
    classifiers: dict[str, LogisticRegression | None] = {}
    priors: dict[str, float] = {}
    for j, code in enumerate(codes):
        known = ~np.isnan(labels[:, j])
        y = labels[known, j].astype(int)
        n_pos, n_neg = int(y.sum()), int((1 - y).sum())
        priors[code] = n_pos / max(1, n_pos + n_neg)
        classifiers[code] = _fit(X[np.flatnonzero(known)], y, seed) if n_pos and n_neg else None
    return classifiers, priors


def train(texts: Sequence[str], labels: np.ndarray, codes: Sequence[str], *, seed: int = 0) -> BaselineModel:
    """Train on traces x modes 0/1 labels (NaN = unlabelled for that mode)."""
    labels = _check(texts, labels, codes)
    # scikit-learn loads in about a second: only a process that trains pays for it.
    from sklearn.model_selection import train_test_split

    vectorizer = _vectorizer(len(texts))
    X = vectorizer.fit_transform([clip_text(t) for t in texts])
    classifiers, priors = _fit_modes(X, labels, codes, seed)
    reports: list[ModeReport] = []
    for j, code in enumerate(codes):
        known = ~np.isnan(labels[:, j])
        y = labels[known, j].astype(int)
        Xm = X[np.flatnonzero(known)]
        n_pos, n_neg = int(y.sum()), int((1 - y).sum())
        report = ModeReport(code=code, n_positive=n_pos, n_negative=n_neg)
        if n_pos == 0 or n_neg == 0:
            report.undefined = (
                f"every labelled trace says {'absent' if n_pos == 0 else 'present'}: "
                "the baseline can only repeat that, and kappa is undefined"
            )
            reports.append(report)
            continue
        if min(n_pos, n_neg) < MIN_CLASS:
            report.undefined = (
                f"only {min(n_pos, n_neg)} {'positive' if n_pos < n_neg else 'negative'} trace(s): "
                f"need at least {MIN_CLASS} for a held-out estimate"
            )
        else:
            idx = np.arange(len(y))
            tr, te = train_test_split(idx, test_size=TEST_SIZE, stratify=y, random_state=seed)
            held = _fit(Xm[tr], y[tr], seed).predict(Xm[te])
            k = cohen_kappa(y[te], held)
            report.n_test = len(te)
            report.kappa = k["value"]
            report.accuracy = percent_agreement(y[te], held)["value"]
            if k["value"] is None:
                report.undefined = f"held-out kappa undefined: {k['undefined']}"
        reports.append(report)
    return BaselineModel(list(codes), vectorizer, classifiers, priors, reports, n_train=len(texts))


def folds(n: int, *, k: int = K_FOLDS, seed: int = 0) -> np.ndarray:
    """Each of ``n`` traces' fold (0 .. min(k, n) - 1): a seeded shuffle dealt round-robin, so fold
    sizes differ by at most one; with fewer than ``k`` traces, one fold per trace."""
    order = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=int)
    out[order] = np.arange(n) % min(k, n)
    return out


@dataclass
class CrossFit:
    """Out-of-fold predictions for the training traces (``cross_fit``)."""

    k: int
    seed: int
    proba: np.ndarray  # training traces x modes: p(present) from the model of the other folds
    fold: np.ndarray  # training trace -> its fold, 0 .. k - 1
    # per mode with both values among its labels: the folds whose training part had only one (or
    # none), so that fold's traces got the part's prior instead of a classifier's answer
    constant_folds: dict[str, int]

    def report(self) -> dict[str, Any]:
        notes = {
            code: (
                f"in {n} of {self.k} folds the other folds' labels were all one value (or none): "
                "that fold's traces got the other folds' prior (0 or 1; 0 without a label) for it"
            )
            for code, n in self.constant_folds.items()
            if n
        }
        return {"k": self.k, "seed": self.seed, "notes": notes}


def cross_fit(
    texts: Sequence[str],
    labels: np.ndarray,
    codes: Sequence[str],
    *,
    k: int = K_FOLDS,
    seed: int = 0,
    on_fold: Callable[[int], None] | None = None,
) -> CrossFit:
    """Predict every training trace with a model (vectorizer and classifiers) fitted without its fold.

    ``on_fold(f)`` is called after each fold (a long run's heartbeat)."""
    labels = _check(texts, labels, codes)
    clipped = [clip_text(t) for t in texts]
    fold = folds(len(texts), k=k, seed=seed)
    n_folds = int(fold.max()) + 1
    proba = np.zeros((len(texts), len(codes)))
    constant = dict.fromkeys(codes, 0)
    for f in range(n_folds):
        held = np.flatnonzero(fold == f)
        rest = np.flatnonzero(fold != f)
        vectorizer = _vectorizer(len(rest))
        X = vectorizer.fit_transform([clipped[i] for i in rest])
        classifiers, priors = _fit_modes(X, labels[rest], codes, seed)
        part = BaselineModel(list(codes), vectorizer, classifiers, priors, n_train=len(rest))
        proba[held] = part.predict_proba([clipped[i] for i in held])
        for code, clf in classifiers.items():
            constant[code] += clf is None
        if on_fold is not None:
            on_fold(f)
    for j, code in enumerate(codes):
        known = labels[~np.isnan(labels[:, j]), j]
        if len(set(known.tolist())) < 2:
            # constant (or unlabelled) over all training traces: every fold is, as is the full
            # model, which the mode report already says; a note here would repeat it
            constant[code] = 0
    return CrossFit(k=n_folds, seed=seed, proba=proba, fold=fold, constant_folds=constant)


class Baseline(Provider):
    """Trained on the project's agreed labels (``agreed``), a rater's (``rater:<id>``) or either (``auto``)."""

    name = "baseline"
    rater_kind = "baseline"
    per_trace = False

    def validate(self, config: RunConfig, *, allowed_keys: Mapping[str, Sequence[str]]) -> dict[str, str]:
        source = config.baseline_source
        if source != "auto" and not source.startswith(("agreed", "rater:")):
            return {"baseline_source": "auto, agreed or rater:<id>"}
        return {}

    def rater_name(self, *, model: str, prompt_number: int | None = None, trained_on: str = "") -> str:
        return f"{NAME} · {trained_on}"
