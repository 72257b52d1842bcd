"""Fallback for text in no known format: blank-line-separated blocks, merged and capped."""

from __future__ import annotations

import re

from traces.parsers.base import ParsedStep, ParsedTrace

MIN_LINES = 8  # blocks shorter than this are merged with the following ones
MAX_LINES = 200  # no step is longer than this
_BLANK_RUN = re.compile(r"\n(?:[ \t\f\v]*\n)+")


def split_blocks(text: str, *, agent: str = "", kind: str = "log", first_line: int = 1) -> list[ParsedStep]:
    """Steps of at least MIN_LINES (when the text allows) and at most MAX_LINES lines."""
    steps: list[ParsedStep] = []
    # (start offset, end offset, first line) of each non-blank block
    blocks: list[tuple[int, int, int]] = []
    pos, line = 0, first_line
    for m in _BLANK_RUN.finditer(text):
        if text[pos : m.start()].strip():
            blocks.append((pos, m.start(), line))
        line += text.count("\n", pos, m.end())
        pos = m.end()
    tail = text[pos:]
    if tail.strip():
        body_end = pos + len(tail.rstrip())
        nl = text.find("\n", body_end)
        blocks.append((pos, len(text) if nl == -1 else nl, line))

    cur: list[int] | None = None  # [start, end, line_start, line_end]
    for s, e, ln in blocks:
        # leading blank lines of the very first block
        lead = len(text[s:e]) - len(text[s:e].lstrip())
        if lead:
            first = text.rfind("\n", s, s + lead) + 1 or s
            ln += text.count("\n", s, first)
            s = max(s, first)
        le = ln + text.count("\n", s, e)
        if cur is not None and cur[3] - cur[2] + 1 < MIN_LINES and le - cur[2] + 1 <= MAX_LINES:
            cur[1], cur[3] = e, le
            continue
        if cur is not None:
            steps.extend(_capped(text, cur, agent, kind))
        cur = [s, e, ln, le]
    if cur is not None:
        steps.extend(_capped(text, cur, agent, kind))
    for i, st in enumerate(steps):
        st.index = i
    return steps


def _capped(text: str, span: list[int], agent: str, kind: str) -> list[ParsedStep]:
    s, e, ls, le = span
    if le - ls + 1 <= MAX_LINES:
        return [ParsedStep(0, agent, kind, text[s:e], ls, le)]
    lines = text[s:e].split("\n")
    return [
        ParsedStep(
            0, agent, kind, "\n".join(lines[k : k + MAX_LINES]), ls + k, ls + k + len(lines[k : k + MAX_LINES]) - 1
        )
        for k in range(0, len(lines), MAX_LINES)
    ]


def parse_plaintext(text: str) -> ParsedTrace:
    return ParsedTrace(format="plaintext", raw_text=text, steps=split_blocks(text))
