"""Shared types and the line-segmentation engine used by every format parser."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

STEP_KINDS = ("message", "tool_call", "tool_output", "system", "log")

# A classifier turns a header match into (agent, kind); SKIP drops that one line
# from every step (noise such as ChatDev's "flask app.py did not start"); None
# means "not a header after all", so the line continues the current step.
SKIP: tuple[str, str] = ("", "")
Classifier = Callable[[re.Match[str]], "tuple[str, str] | None"]


@dataclass(slots=True)
class ParsedStep:
    index: int
    agent: str
    kind: str
    content: str
    line_start: int
    line_end: int
    # What the format says about the step beyond its text, only the keys it gives: "model",
    # "input_tokens", "output_tokens" (ints), "timestamp" (as written), "duration_ms" (number).
    details: dict = field(default_factory=dict)
    # Span-based formats (traces/parsers/spans/): the tree and what each span says about itself.
    parent: int | None = None  # index of the parent step (always an earlier step), None at the top
    model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    started_at: str = ""  # ISO 8601, UTC, as the span gives it
    duration_ms: int | None = None
    # Whom the step addresses, where the format says so (Who&When's "Orchestrator (-> WebSurfer)",
    # a handoff's target): the agent it hands work to. The text keeps the addressee as written.
    recipient: str = ""


@dataclass
class ParsedTrace:
    format: str
    raw_text: str
    steps: list[ParsedStep]
    mas_name: str = ""
    llm_name: str = ""
    benchmark: str = ""
    task: str = ""
    external_id: str = ""
    outcome: str = ""
    metadata: dict = field(default_factory=dict)


class ParseError(ValueError):
    """Message says what and where: file name, record number and/or line number.

    ``record`` is the 0-based index of the record in its file; messages count records from 1
    ("record 1" is the first), as a person reading the file would.
    """

    def __init__(self, message: str, *, filename: str = "", line: int | None = None, record: int | None = None) -> None:
        self.reason = message
        self.filename = filename
        self.line = line
        self.record = record
        where = [filename] if filename else []
        if record is not None:
            where.append(f"record {record + 1}")
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


def normalise_newlines(text: str) -> str:
    """Line numbers count "\\n" only; "\\r\\n" becomes "\\n", a lone "\\r" stays in its line."""
    return text.replace("\r\n", "\n") if "\r" in text else text


def _span(text: str, start: int, end: int, line: int) -> tuple[int, int, int, int] | None:
    """Trim blank lines at both ends of text[start:end]; return (start, end, line_start, line_end)."""
    seg = text[start:end]
    body_len = len(seg.rstrip())
    if body_len == 0:
        return None
    first_char = len(seg) - len(seg.lstrip())
    first = seg.rfind("\n", 0, first_char) + 1
    line += seg.count("\n", 0, first)
    stop = seg.find("\n", body_len)
    stop = len(seg) if stop == -1 else stop
    return start + first, start + stop, line, line + seg.count("\n", first, stop)


def segment(
    text: str,
    header: re.Pattern[str],
    classify: Classifier,
    *,
    preamble: tuple[str, str] | None = ("", "log"),
    merge_kinds: frozenset[str] = frozenset({"log"}),
) -> list[ParsedStep]:
    """Split text at header lines: a step runs from its header to the line before the next one.

    `header` must be a MULTILINE pattern anchored at a line start. Blank lines at the end of
    a step belong to no step. Consecutive steps of a kind in `merge_kinds` by the same agent
    are merged, so runs of log lines do not become dozens of one-line steps.
    """
    marks: list[tuple[int, int, tuple[str, str]]] = [(0, 1, preamble or SKIP)]
    line, last = 1, 0
    for m in header.finditer(text):
        who = classify(m)
        if who is None:
            continue
        s = m.start()
        line += text.count("\n", last, s)
        last = s
        marks.append((s, line, who))
    spans: list[list] = []  # [start, end, line_start, line_end, agent, kind]
    n = len(text)
    for i, (s, ln, who) in enumerate(marks):
        e = marks[i + 1][0] if i + 1 < len(marks) else n
        if who == SKIP:
            if i == 0:
                continue  # no preamble step wanted: those lines belong to no step
            # the skipped line itself belongs to no step; text after it becomes a log step
            nl = text.find("\n", s, e)
            if nl == -1:
                continue
            s, ln, who = nl + 1, ln + 1, ("", "log")
        sp = _span(text, s, e, ln)
        if sp is None:
            continue
        agent, kind = who
        prev = spans[-1] if spans else None
        if (
            prev is not None
            and kind in merge_kinds
            and prev[5] == kind
            and prev[4] == agent
            and not text[prev[1] : sp[0]].strip()
        ):
            prev[1], prev[3] = sp[1], sp[3]
            continue
        spans.append([sp[0], sp[1], sp[2], sp[3], agent, kind])
    return [ParsedStep(i, a, k, text[s:e], ls, le) for i, (s, e, ls, le, a, k) in enumerate(spans)]


def renumber(steps: Iterable[ParsedStep]) -> list[ParsedStep]:
    out = list(steps)
    for i, st in enumerate(out):
        st.index = i
    return out
