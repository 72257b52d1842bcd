"""Behaviour search, the pure part: the request for one trace, the answer read and checked, the
quotes clustered (no Django, no database).

The judge gets the behaviour in the user's words and the trace (``prompting.render_trace``: each
step headed ``[step N] agent (kind)``, long traces shortened the way the judge's runs shorten
them) and answers JSON: whether the behaviour occurs, how sure it is (0-1), the steps that show it
with a verbatim quote of each, one sentence why. A quote is kept only with its step; each is
checked against that step's text (whitespace and case ignored) and marked ``found`` or not, so a
quote the model made up is shown as such and never passes for evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from annotations.judge.prompting import AnswerError, StepIn, answer_json, render_trace

MAX_QUOTES = 5
MAX_QUOTE_CHARS = 400
OUTPUT_TOKENS = 700  # max_tokens of one call (a reasoning model spends part of it thinking)
PROMPT_OVERHEAD_TOKENS = 350  # the instructions around the trace
CHARS_PER_TOKEN = 3  # the budget's estimate of a trace's tokens (tokenizers give 3-4 English characters a
# token; 3 errs high); the spent figures are the server's own counts

INSTRUCTIONS = """You read one execution trace of a multi-agent LLM system and look for one behaviour.

Behaviour: {behaviour}

Answer with one JSON object and nothing else:
{{"present": true or false,
  "score": a number from 0 to 1, how sure you are that the behaviour occurs,
  "quotes": [{{"step": step number, "quote": "words copied exactly from that step"}}],
  "explanation": "one sentence"}}
Quote at most {max_quotes} steps, only where the behaviour shows, each quote copied verbatim from the
step's text (at most 300 characters). If the behaviour does not occur, answer present false and no quotes."""


@dataclass
class Quote:
    step: int
    quote: str
    found: bool


@dataclass
class Finding:
    present: bool
    score: float
    quotes: list[Quote] = field(default_factory=list)
    explanation: str = ""


def behaviour_messages(*, behaviour: str, steps: Sequence[StepIn], max_chars: int) -> list[dict[str, str]]:
    text, _ = render_trace(steps, max_chars=max_chars)
    return [
        {"role": "system", "content": INSTRUCTIONS.format(behaviour=behaviour.strip(), max_quotes=MAX_QUOTES)},
        {"role": "user", "content": f"Trace:\n{text}"},
    ]


def estimate_tokens(n_chars: int, *, max_chars: int) -> tuple[int, int]:
    """(input, output) tokens the budget counts for a trace of ``n_chars`` characters."""
    return min(n_chars, max_chars) // CHARS_PER_TOKEN + PROMPT_OVERHEAD_TOKENS, OUTPUT_TOKENS


def _json_object(raw: str) -> Mapping:
    value = answer_json(raw)
    if not isinstance(value, dict):
        raise AnswerError("the answer's JSON is not an object")
    return value


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def finding_parse(raw: str, *, steps: Mapping[int, str]) -> Finding:
    """The answer as a ``Finding``; ``AnswerError`` when it cannot be read. ``steps``: index -> text."""
    obj = _json_object(raw)
    present = obj.get("present")
    if not isinstance(present, bool):
        raise AnswerError('"present" must be true or false')
    try:
        score = float(obj.get("score", 1.0 if present else 0.0))
    except (TypeError, ValueError):
        raise AnswerError('"score" must be a number from 0 to 1') from None
    if not 0 <= score <= 1:
        raise AnswerError(f'"score" must be from 0 to 1, got {score}')
    quotes_in = obj.get("quotes") or []
    if not isinstance(quotes_in, list):
        raise AnswerError('"quotes" must be a list')
    quotes = []
    for q in quotes_in[:MAX_QUOTES]:
        if not isinstance(q, dict) or not isinstance(q.get("quote"), str):
            raise AnswerError('each quote must be {"step": number, "quote": "text"}')
        try:
            step = int(q.get("step"))  # type: ignore[arg-type]  # a None or a list is refused below
        except (TypeError, ValueError):
            raise AnswerError(f"a quote's step is not a number: {q.get('step')!r}") from None
        text = q["quote"].strip()[:MAX_QUOTE_CHARS]
        if not text:
            continue
        found = step in steps and _squash(text) in _squash(steps[step])
        quotes.append(Quote(step, text, found))
    explanation = str(obj.get("explanation") or "")[:1000]
    return Finding(present, score if present else min(score, 0.5), quotes, explanation)


def rank_score(finding: Finding) -> float:
    """The order of hits: the model's score, less when none of its quotes is in its step."""
    if not finding.present:
        return 0.0
    return finding.score if any(q.found for q in finding.quotes) else finding.score / 2


@dataclass
class Clusters:
    labels: list[int]  # per input text, its group number
    terms: list[list[str]]  # per group, its top terms


def cluster_quotes(texts: Sequence[str], *, max_groups: int = 6, seed: int = 0) -> Clusters:
    """Groups of hits by what their quotes say: TF-IDF (words of letters, and their bigrams; numbers
    and ids left out) and k-means, k from 2 to ``max_groups`` but at most a third of the texts (a
    group of one or two hits says little), chosen by the silhouette score; fewer than 6 texts, or
    no k that separates them, are one group."""
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import silhouette_score

    texts = [t if t.strip() else "(no quote)" for t in texts]
    if not texts:
        return Clusters([], [])
    vec = TfidfVectorizer(ngram_range=(1, 2), stop_words="english", min_df=1, sublinear_tf=True,
                          token_pattern=r"(?u)\b[^\W\d_]{2,}\b")  # fmt: skip  # noqa: S106 - a regex, not a secret
    try:
        X = vec.fit_transform(texts)
    except ValueError:  # nothing but stop words
        return Clusters([0] * len(texts), [[]])
    vocab = np.array(vec.get_feature_names_out())
    best_labels, best_k, best = np.zeros(len(texts), dtype=int), 1, -1.0
    n_distinct = len({tuple(r.indices) for r in X})
    for k in range(2, min(max_groups, len(texts) // 3, n_distinct - 1) + 1):
        labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(X)
        if len(set(labels)) < 2:
            continue
        score = silhouette_score(X, labels)
        if score > best:
            best_labels, best_k, best = labels, k, score
    terms = []
    for g in range(best_k):
        rows = X[best_labels == g]
        weights = np.asarray(rows.mean(axis=0)).ravel()
        terms.append([str(vocab[i]) for i in weights.argsort()[::-1][:3] if weights[i] > 0])
    return Clusters([int(v) for v in best_labels], terms)


__all__ = [
    "OUTPUT_TOKENS",
    "AnswerError",
    "Clusters",
    "Finding",
    "Quote",
    "behaviour_messages",
    "cluster_quotes",
    "estimate_tokens",
    "finding_parse",
    "rank_score",
]
