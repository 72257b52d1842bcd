"""Plain-text search in one trace: the hits, their lines and snippets, and the window of the first.

The viewer's search box asks ``trace_search`` (through the trace's API); a search answer can
carry the steps around its first hit after the reader's step (``search_hit_window``), the same
window a far jump fetches, so Enter shows a far hit with one request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import QuerySet

from traces.models import Step, Trace
from traces.viewer.selectors import JUMP_BEFORE, JUMP_LINES, JUMP_STEPS, trace_steps_window

SEARCH_MAX_HITS = 2000
_AROUND = 400  # characters on each side of a hit that its snippet may use
SEARCH_MIN_CHARS = 2


@dataclass(frozen=True)
class SearchHit:
    step: int  # step index
    line: int  # line number in the raw text (1-based)
    col: int  # character offset of the match in that line
    snippet: str


@dataclass(frozen=True)
class SearchResult:
    q: str
    hits: list[SearchHit]
    truncated: bool

    @property
    def count(self) -> int:
        return len(self.hits)


def trace_search(*, trace: Trace, q: str, max_hits: int = SEARCH_MAX_HITS) -> SearchResult:
    """Case-insensitive plain-text search over a trace's steps: every occurrence, in order.

    PostgreSQL picks the steps that contain ``q``; Python finds the occurrences inside them and
    turns offsets into raw-text line numbers (a step's content is its lines joined by newlines).
    """
    q = q.strip("\n")
    if len(q.strip()) < SEARCH_MIN_CHARS:
        return SearchResult(q=q, hits=[], truncated=False)
    pattern = re.compile(re.escape(q), re.IGNORECASE)
    steps = (
        _steps_containing(trace=trace, q=q)
        .order_by("index")
        .values_list("index", "line_start", "content")
        .iterator(chunk_size=200)
    )
    hits: list[SearchHit] = []
    for index, line_start, content in steps:
        line_no, line_pos = line_start, 0
        for m in pattern.finditer(content):
            if len(hits) >= max_hits:
                return SearchResult(q=q, hits=hits, truncated=True)
            nl = content.count("\n", line_pos, m.start())
            if nl:
                line_no += nl
                line_pos = content.rfind("\n", 0, m.start()) + 1
            # the snippet needs the hit's surroundings only: never the whole of a 40 MB line
            lo = max(line_pos, m.start() - _AROUND)
            hi = content.find("\n", m.start(), m.end() + _AROUND)
            line_text = content[lo : hi if hi != -1 else min(len(content), m.end() + _AROUND)]
            col = m.start() - line_pos
            snippet = _snippet(line_text, m.start() - lo, len(q))
            if lo > line_pos and not snippet.startswith("…"):
                snippet = "…" + snippet
            if hi == -1 and m.end() + _AROUND < len(content) and not snippet.endswith("…"):
                snippet += "…"
            hits.append(SearchHit(step=index, line=line_no, col=col, snippet=snippet))
    return SearchResult(q=q, hits=hits, truncated=False)


def search_first_hit(*, result: SearchResult, around: int) -> int | None:
    """The hit Enter shows first: the first at or after step ``around``, else the first of all."""
    for k, hit in enumerate(result.hits):
        if hit.step >= around:
            return k
    return 0 if result.hits else None


def search_hit_window(*, trace: Trace, result: SearchResult, around: int) -> list[Step]:
    """The steps the viewer shows for the first hit after ``around``: the same window as a far
    jump to that step (from 3 steps before it, at most ``JUMP_STEPS`` steps / ``JUMP_LINES``
    lines), so the viewer can show the hit without a second request. Empty without hits."""
    k = search_first_hit(result=result, around=around)
    if k is None:
        return []
    step = result.hits[k].step
    start = max(0, step - JUMP_BEFORE)
    return trace_steps_window(trace=trace, start=start, limit=max(JUMP_STEPS, step - start + 1), max_lines=JUMP_LINES)


def _steps_containing(*, trace: Trace, q: str) -> QuerySet[Step]:
    """The trace's steps whose content contains ``q``, ignoring case.

    Django's ``icontains`` is ``UPPER(content) LIKE UPPER(q)``, and UPPER in a UTF-8 locale costs
    ~60 ns a byte: 0.3-0.5 s for a 20 MB trace. When ``q`` is ASCII (nearly every search of a
    trace), the content is lowered in the "C" collation, whose case folding is a byte table, and
    searched with ``strpos`` (a Boyer-Moore-Horspool scan): the same answer, since only ASCII
    letters fold to ASCII letters (the one exception, U+212A KELVIN SIGN matching "k", is not worth
    it). ``ILIKE`` in the "C" collation lowers the text the same way but then runs the LIKE
    matcher, which tries a match at every byte: ``strpos`` halves the time at 20 MB. Other queries
    keep the locale's folding.
    """
    qs = Step.objects.filter(trace=trace)
    if q.isascii():
        where = 'strpos(lower("traces_step"."content" COLLATE "C"), %s) > 0'
        return qs.extra(where=[where], params=[q.lower()])  # noqa: S610 - q is a parameter
    return qs.filter(content__icontains=q)


def _snippet(line: str, col: int, length: int, width: int = 120) -> str:
    if len(line) <= width:
        return line
    start = max(0, min(col - width // 3, len(line) - width))
    text = line[start : start + width]
    return ("…" if start else "") + text + ("…" if start + width < len(line) else "")


__all__ = [
    "SEARCH_MAX_HITS",
    "SEARCH_MIN_CHARS",
    "SearchHit",
    "SearchResult",
    "search_first_hit",
    "search_hit_window",
    "trace_search",
]
