"""How a corpus search finds its matching steps (``selectors.corpus_search`` groups and shows them).

Newest traces first, then (for a common word) the oldest, then an index: the word index
(``traces`` migration 0019) for words and phrases, and for prefixes and regular expressions whose
matches are made of word characters (their words looked up in the vocabulary first, 0020), the
trigram index for the others. The plan is pinned: every setting and why is beside ``PLAN`` and
``matching_steps``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection, transaction
from django.db.utils import OperationalError

from annotations.corpus.query import PLAIN_WORD, CompiledQuery, QueryError, word_exact, word_literal, word_only
from traces.models import Project

if TYPE_CHECKING:
    from annotations.corpus.selectors import CorpusQuery

SEARCH_TIMEOUT_MS = 20_000
FEW_TRACES = 1_000  # label filters keeping more traces are a filter, not an index lookup


def word_lookup(compiled: CompiledQuery) -> str | None:
    """The words a words or phrase search can look up in the word index (``traces`` migration
    0019), or None. Every step matching ``\\mword\\M`` holds the word among its ``step_words``
    (both lower-cased and split by PostgreSQL the same way), so the index's steps are a superset
    that the regex then narrows. Only the words that are certainly keys of their own (plain ASCII
    letters, digits, underscores; 1-100 of them: lower-casing elsewhere is the locale's, and could
    differ from how the regex ignores case); without one, None (an empty lookup matches every step)."""
    if compiled.mode not in ("words", "phrase"):
        return None
    plain = [w for w in re.findall(r"\w+", compiled.text) if PLAIN_WORD.fullmatch(w)]
    return " ".join(plain) or None


VOCABULARY_CAP = 5_000  # words a pattern may match among the vocabulary; more: the trigram index
# step_long_words' condition (traces migration 0020), written as it is there so that it serves
_LONG_WORDS = "s.content ~ '[[:alnum:]_]{101}'"


def _exact(pattern: str) -> str | None:
    """The whole word to look ``pattern`` up by (``query.word_exact``), unless its run of 3+ word
    characters (``query.word_literal``) is longer: then the word's rarity is the likelier (``run
    7777\\d\\.1\\y`` holds "1" whole, in a quarter of the steps, and "7777" in few words)."""
    exact = word_exact(pattern)
    if exact is None:
        return None
    literal = word_literal(pattern)
    return exact if literal is None or len(exact) >= len(literal) else None


def vocabulary_lookups(cur, compiled: CompiledQuery) -> list[list[str]] | None:
    """For a prefix or regex search, per pattern, the words of the vocabulary (``SearchWord``) a
    step matching it must hold one of: the word every match holds whole (``\\.py\\y``: "py",
    ``query.word_exact``; no lookup, so a short one serves too), else the words the pattern matches
    where every match is made of word characters (``query.word_only``), else the words containing
    its longest run of word characters (``query.word_literal``); at most ``VOCABULARY_CAP`` each. A
    matching step holds one of them or a word too long for the word index (``step_long_words``): a
    superset the regex narrows. None where a pattern's words pass the cap, or no pattern has any
    (the trigram index serves it). ``(?c)`` is left out for the lookup: the vocabulary is
    lower-cased."""
    if compiled.mode not in ("prefix", "regex"):
        return None
    lookups = []
    for pattern in compiled.patterns:
        if (exact := _exact(pattern)) is not None:
            lookups.append([exact])  # a whole word of every match: no lookup needed
            continue
        if word_only(pattern):
            test, arg = "word ~* %s", pattern.removeprefix("(?c)")
        elif (literal := word_literal(pattern)) is not None:
            test, arg = "word ~ %s", literal  # letters, digits and _: nothing to escape
        else:
            continue
        cur.execute(f"SELECT word FROM traces_searchword WHERE {test} LIMIT %s", [arg, VOCABULARY_CAP + 1])  # noqa: S608
        words = [w for (w,) in cur.fetchall()]
        if len(words) > VOCABULARY_CAP:
            return None
        lookups.append(words)
    return lookups or None


def conditions(
    query: CorpusQuery,
    compiled: CompiledQuery,
    *,
    project: Project,
    words: str | None = None,
    vocabulary: list[list[str]] | None = None,
):
    """(steps' conditions, their parameters, traces' conditions, their parameters). With ``words``
    (``word_lookup``) or ``vocabulary`` (``vocabulary_lookups``), the steps come from the word
    index and the regex only rechecks them (written so that the trigram index cannot serve it:
    ``content || ''``)."""
    by_words = words is not None or vocabulary is not None
    # the partial indexes' conditions (traces/search/indexing.py; the word index's is "IS TRUE")
    steps: list[str] = ["s.searchable IS TRUE" if by_words else "s.searchable"]
    sp: list[Any] = []
    if words is not None:
        steps.append("step_words(s.content) @> step_words(%s)")
        sp.append(words)
    for matched in vocabulary or ():
        steps.append(f"(step_words(s.content) && %s::text[] OR {_LONG_WORDS})")
        sp.append(matched)
    for pattern in compiled.patterns:
        steps.append("(s.content || '') ~* %s" if by_words else "s.content ~* %s")
        sp.append(pattern)
    for column, value in (("s.agent", query.agent), ("s.kind", query.kind)):
        if value:
            steps.append(f"{column} = %s")
            sp.append(value)
    if query.round:
        steps.append("s.trace_id IN (SELECT trace_id FROM annotations_roundtrace WHERE round_id = %s)")
        sp.append(query.round)
    traces: list[str] = ["t.project_id = %s"]
    tp: list[Any] = [project.pk]
    for column, value in (("t.mas_name", query.framework), ("t.llm_name", query.llm)):
        if value:
            traces.append(f"{column} = %s")
            tp.append(value)
    if query.outcome:
        traces.append("t.outcome = %s")
        tp.append("" if query.outcome == "unknown" else query.outcome)
    if query.date_from:
        traces.append("t.imported_at >= %s")
        tp.append(dt.datetime.combine(query.date_from, dt.time.min, tzinfo=dt.UTC))
    if query.date_to:
        traces.append("t.imported_at < %s")
        tp.append(dt.datetime.combine(query.date_to + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC))
    return " AND ".join(steps), sp, " AND ".join(traces), tp


# Three ways to find the matching steps, newest traces first:
#
# 1. The newest traces' steps, read one by one (``_scan``; a window of ``WINDOW_BYTES`` of their
#    text, then at most ``MORE_BYTES`` more where the first window predicts the cap within it). A
#    word in a fifth of the steps fills the cap from a few thousand steps, where building the
#    bitmap of its millions of steps took 1-2 s at 20 M steps.
# 2. For a search whose whole words (``_whole_words``: a words or phrase search's, a regex's such
#    as ``\.py\b``) the word index's statistics know as common (``_common_share``: ANALYZE keeps
#    its most common words and their shares), the oldest traces' steps, one by one, as far as that
#    share predicts the cap (at most ``COMMON_BYTES``). The newest traces may hold a common word
#    sparsely (an import of another kind of traces: 1.7% of their steps where the rest hold it in
#    a fifth), and its bitmap took ~1 s at 20 M steps.
# 3. The rest from an index (``_indexed``: the word index for words and phrases, for regexes
#    holding a whole word or a run of 3+ word characters and for prefixes, else the trigram
#    index): a bitmap scan, each candidate rechecked, joined to its trace by primary key. Left to
#    itself the planner may walk every step of the project's traces instead (a bitmap of
#    step_unique_index per trace, the regex on each step): for a rare word that reads the whole
#    project, so the plan is pinned. The steps are a MATERIALIZED CTE read only as far as the
#    LIMIT needs. work_mem: the bitmap of a common word holds 100,000s of rows; in the default
#    4 MB it goes lossy and every row of those pages is rechecked (2.6 s instead of 0.65 s for
#    10,000 hits at 20 M).
#
# Under the cap every way gives every match of its traces, so the answer is the same whichever
# ran (the tests compare each with a scan); over it, the steps read are the newest window's, then
# the oldest traces' (the index's bitmap, too, returns them in table order: oldest first).
WINDOW_BYTES = 4 * 1024**2
MORE_BYTES = 40 * 1024**2
# the oldest traces for a common word (way 2): "ok", in 4.8% of the steps, needs ~54 MB of them:
# 179 ms read one by one at 21 M steps, 469 ms through its bitmap of ~1 M steps (bench/README.md)
COMMON_BYTES = 80 * 1024**2
_WINDOW_TRACES = 20_000  # at most in a window (of tiny traces)
STEP_BYTES = 1024  # a step's text, roughly: turns a share of steps into bytes to read
PLAN = (
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL enable_hashjoin = off",
    "SET LOCAL enable_mergejoin = off",
    "SET LOCAL work_mem = '64MB'",
    "SET LOCAL max_parallel_workers_per_gather = 0",  # 2 cores: workers cost more than they bring here
)
_COLUMNS = "s.trace_id, s.index, s.agent, s.kind, t.mas_name, t.llm_name, t.outcome"


def _window(cur, project_id: int, nbytes: float, below: int | None) -> tuple[int | None, bool]:
    """The oldest trace id of the newest traces (below ``below``) holding ``nbytes`` of text (None
    when there are none), and whether they are all the traces left. Read down the project's
    newest-first index a few hundred traces at a time."""
    lo, total, below = None, 0, below if below is not None else 2**62
    for _ in range(_WINDOW_TRACES // 500):
        cur.execute(
            "SELECT id, size_bytes FROM traces_trace WHERE project_id = %s AND id < %s ORDER BY id DESC LIMIT 500",
            [project_id, below],
        )
        rows = cur.fetchall()
        for tid, size in rows:
            if total >= nbytes:
                return lo, False
            lo, total = tid, total + size
        if len(rows) < 500:
            return lo, True
        below = rows[-1][0]
    return lo, False


def _window_up(cur, project_id: int, nbytes: float, below: int) -> int:
    """The id above the project's oldest traces holding ``nbytes`` of text (``below`` when the
    traces under it hold less): read up its trace index a few hundred at a time, as ``_window``."""
    above, total = 0, 0
    for _ in range(_WINDOW_TRACES // 500):
        cur.execute(
            "SELECT id, size_bytes FROM traces_trace WHERE project_id = %s AND id >= %s AND id < %s "
            "ORDER BY id LIMIT 500",
            [project_id, above, below],
        )
        rows = cur.fetchall()
        for tid, size in rows:
            if total >= nbytes:
                return tid
            total += size
        if len(rows) < 500:
            return below
        above = rows[-1][0] + 1
    return above


def _whole_words(compiled: CompiledQuery) -> list[str] | None:
    """The words every matching step holds whole: a words or phrase search's (``word_lookup``), a
    regex's or prefix's where each pattern holds one (``query.word_exact``); else None."""
    words = word_lookup(compiled)
    if words is not None:
        return words.lower().split()
    if compiled.mode in ("prefix", "regex"):
        exact = [_exact(p) for p in compiled.patterns]
        return [w for w in exact if w] if all(exact) else None
    return None


def _common_share(cur, compiled: CompiledQuery) -> float:
    """The share of searchable steps holding every word of a search (``_whole_words``), from the
    statistics ANALYZE keeps of the word index (its most common words with their shares, over a
    sample of the table: every project's steps); as if the words were independent. 0 for a word
    not among them, and for other searches."""
    words = _whole_words(compiled)
    if not words:
        return 0.0
    cur.execute(
        "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
        "WHERE schemaname = current_schema() AND tablename = 'step_words_gin' AND attname = 'step_words'"
    )
    row = cur.fetchone()
    if not row or row[0] is None:
        return 0.0
    shares = dict(zip(row[0], row[1], strict=False))  # the freqs end with three summary numbers
    share = 1.0
    for word in words:
        share *= shares.get(word, 0.0)
    return share


def _traces_kept(where: tuple, ids: np.ndarray | None, lo: int, hi: int | None) -> tuple:
    """``where`` and the label filters' traces between ``lo`` and ``hi`` (sent as a typed array: an
    untyped one is compared element by element, a bigint[] by a hash; only the part a query's
    traces can hold: 100,000 ids are ~700 KB to send and parse). A few traces: their steps may be
    read by trace (step_unique_index); many: a filter on the candidates (probing 90,000 traces'
    steps took ~0.8 s at 20 M steps)."""
    steps, sp, traces, tp = where
    if ids is None:
        return where
    part = ids[(ids >= lo) & (ids < (hi if hi is not None else 2**62))]
    column = "s.trace_id" if len(part) <= FEW_TRACES else "(s.trace_id + 0)"
    return f"{steps} AND {column} = ANY(%s::bigint[])", [*sp, part.tolist()], traces, tp


def _scan(cur, where: tuple, lo: int, hi: int | None, limit: int, *, newest: bool = True) -> list[tuple]:
    """The matching steps of the traces ``lo <= id < hi``, read step by step (bitmaps are off),
    newest traces first or oldest first."""
    steps, sp, traces, tp = where
    cur.execute(
        f"SELECT {_COLUMNS} FROM traces_trace t JOIN traces_step s ON s.trace_id = t.id "  # noqa: S608
        f"WHERE s.trace_id >= %s AND s.trace_id < %s AND {traces} AND {steps} "
        f"ORDER BY s.trace_id {'DESC' if newest else 'ASC'} LIMIT %s",
        [lo, hi if hi is not None else 2**62, *tp, *sp, limit],
    )
    return cur.fetchall()


def _indexed(cur, where: tuple, above: int, below: int | None, limit: int) -> list[tuple]:
    """The matching steps of the traces ``above <= id < below``, from the index ``where`` asks for
    (words or trigrams; bitmaps are on: ``_index_conditions``)."""
    steps, sp, traces, tp = where
    if below is not None:
        steps, sp = f"{steps} AND s.trace_id < %s", [*sp, below]
    if above:
        steps, sp = f"{steps} AND s.trace_id >= %s", [*sp, above]
    cur.execute(
        "WITH s AS MATERIALIZED (SELECT s.trace_id, s.index, s.agent, s.kind FROM traces_step s "  # noqa: S608
        f"WHERE {steps}) SELECT {_COLUMNS} FROM s JOIN traces_trace t ON t.id = s.trace_id WHERE {traces} LIMIT %s",
        [*sp, *tp, limit],
    )
    return cur.fetchall()


def _index_conditions(cur, query: CorpusQuery, compiled: CompiledQuery, *, project: Project, where: tuple) -> tuple:
    """The conditions for ``_indexed``: the word index's for words and phrases (``word_lookup``)
    and for prefixes and regexes of word characters (``vocabulary_lookups``), else ``where`` (the
    trigram index's). Turns bitmaps on: a GIN index is read by bitmap only."""
    cur.execute("SET LOCAL enable_bitmapscan = on")
    words = word_lookup(compiled)
    if words is not None:
        return conditions(query, compiled, project=project, words=words)
    vocabulary = vocabulary_lookups(cur, compiled)
    if vocabulary is not None:
        return conditions(query, compiled, project=project, vocabulary=vocabulary)
    return where


def matching_steps(
    query: CorpusQuery, compiled: CompiledQuery, *, project: Project, ids: np.ndarray | None, cap: int
) -> list[tuple]:
    """(trace id, step index, agent, kind, framework, llm, outcome) of the matching steps, at most
    ``cap``: the newest window's first, then (when the cap is not reached) the index's. ``ids``: the
    traces the label filters keep (None: no label filter)."""
    where = conditions(query, compiled, project=project)
    project_id = project.pk
    with transaction.atomic(), connection.cursor() as cur:
        # the windows are read down the indexes in order (no bitmaps: a bitmap reads every row first)
        timeout = f"SET LOCAL statement_timeout = {int(SEARCH_TIMEOUT_MS)}"
        cur.execute("; ".join((timeout, *PLAN, "SET LOCAL enable_bitmapscan = off")))
        try:
            lo, last = _window(cur, project_id, WINDOW_BYTES, None)
            if lo is None:
                return []
            rows = _scan(cur, _traces_kept(where, ids, lo, None), lo, None, cap)
            if not last and 0 < len(rows) < cap:
                # the first window's share of hits predicts how far the cap is
                more = (cap - len(rows)) * WINDOW_BYTES / len(rows) * 1.25
                if more <= MORE_BYTES:
                    lo2, last = _window(cur, project_id, more, lo)
                    if lo2 is not None:
                        rows += _scan(cur, _traces_kept(where, ids, lo2, lo), lo2, lo, cap - len(rows))
                        lo = lo2
            above = 0  # the oldest traces read one by one end here
            if not last and len(rows) < cap:
                # a word the statistics know as common: the oldest traces' steps, one by one, where
                # they predict the cap (the newest may hold it sparsely: an import of other traces)
                share = _common_share(cur, compiled)
                need = (cap - len(rows)) / share * STEP_BYTES * 1.25 if share else COMMON_BYTES + 1
                if need <= COMMON_BYTES:
                    above = _window_up(cur, project_id, need, lo)
                    rows += _scan(cur, _traces_kept(where, ids, 0, above), 0, above, cap - len(rows), newest=False)
                    last = above >= lo
            if not last and len(rows) < cap:
                indexed = _index_conditions(cur, query, compiled, project=project, where=where)
                rows += _indexed(cur, _traces_kept(indexed, ids, above, lo), above, lo, cap - len(rows))
        except OperationalError as exc:
            if "statement timeout" in str(exc):
                raise QueryError(
                    f"The search ran longer than {SEARCH_TIMEOUT_MS // 1000} s and was stopped: "
                    "add a filter or a rarer word."
                ) from None
            raise
        return rows
