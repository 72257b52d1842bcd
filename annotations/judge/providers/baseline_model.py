"""The offline baseline provider: per failure mode, TF-IDF features + logistic regression (pure, no Django).

It is a bag-of-words classifier, not an LLM, and is reported as such. Its quality is measured
honestly on held-out traces: per mode, a stratified split (test share ``TEST_SIZE``), the
classifier fitted on the training part only, Cohen's kappa on the held-out part. A mode with
fewer than ``MIN_CLASS`` positive (or negative) traces gets no held-out figure and says why.

The TF-IDF vocabulary and IDF weights are fitted once on all training texts without labels
(unsupervised, as is usual); only the classifiers see labels, and only of their training split.
The final classifiers are then refitted on every labelled trace.

As a provider it labels a whole run at once (``per_trace = False``): ``judge/baseline.py``
gathers the labels, trains, and writes every trace's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(class_weight="balanced", max_iter=2000, C=4.0, random_state=seed)
    clf.fit(X, y)
    return clf


def train(texts: Sequence[str], labels: np.ndarray, codes: Sequence[str], *, seed: int = 0) -> BaselineModel:
    """Train on traces x modes 0/1 labels (NaN = unlabelled for that mode)."""
    labels = np.asarray(labels, dtype=float)
    if labels.shape != (len(texts), len(codes)):
        raise ValueError(f"labels must be {len(texts)} x {len(codes)}, not {labels.shape}")
    if len(texts) < 2:
        raise ValueError(f"need at least 2 labelled traces to train, got {len(texts)}")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.model_selection import train_test_split

    vectorizer = TfidfVectorizer(
        max_features=30_000,
        ngram_range=(1, 2),
        sublinear_tf=True,
        min_df=2 if len(texts) >= 20 else 1,
        token_pattern=r"(?u)\b[A-Za-z_][A-Za-z0-9_]+\b",  # noqa: S106
        dtype=np.float32,
    )
    X = vectorizer.fit_transform([clip_text(t) for t in texts])
    classifiers: dict[str, LogisticRegression | None] = {}
    priors: dict[str, float] = {}
    reports: list[ModeReport] = []
    for j, code in enumerate(codes):
        known = ~np.isnan(labels[:, j])
        y = labels[known, j].astype(int)
        Xm = X[np.flatnonzero(known)]
        n_pos, n_neg = int(y.sum()), int((1 - y).sum())
        priors[code] = n_pos / max(1, n_pos + n_neg)
        report = ModeReport(code=code, n_positive=n_pos, n_negative=n_neg)
        if n_pos == 0 or n_neg == 0:
            classifiers[code] = None
            report.undefined = (
                f"every labelled trace says {'absent' if n_pos == 0 else 'present'}: "
                "the baseline can only repeat that, and kappa is undefined"
            )
            reports.append(report)
            continue
        classifiers[code] = _fit(Xm, y, seed)
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
