"""Reads for the trace list and the trace viewer, always scoped to a project the caller may see.

Nothing here loads ``Trace.raw_text`` except ``trace_raw_text`` / ``trace_raw_lines``: a project
holds thousands of traces of ~100 KB each and the list must stay cheap. What the list's
"labelled" filter and column mean is defined by the annotations app, through the registry in
``traces.viewer.label_state``, so traces never imports the annotations app.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Substr
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from traces.models import LiveTrace, Project, Step, Trace
from traces.projects.selectors import user_can
from traces.viewer.label_state import trace_label_state, trace_label_state_of
from traces.viewer.tree import trace_tree

PAGE_SIZE = 50
# The first window of the viewer: at most this many steps and (about) this many lines.
FIRST_WINDOW_STEPS = 30
FIRST_WINDOW_LINES = 300
STEPS_WINDOW_MAX = 200
# a far jump in the viewer (static/js/trace-viewer.js JUMP_*): steps before the target, steps, lines
JUMP_BEFORE = 3
JUMP_STEPS = 24
JUMP_LINES = 400
RAW_PAGE_LINES = 1000
# A line longer than this (a 40 MB JSON blob on one line) is shown a piece at a time: the page
# renders its first LINE_PIECE characters and a control; trace-viewer.js shows the other pieces
# (previous, next, end) and the piece a search hit is in. Keep in step with LINE_PIECE there.
LINE_PIECE = 20_000
COLLAPSE_OVER_LINES = 40  # longer steps show their first COLLAPSED_HEAD lines and a "show all"
COLLAPSED_HEAD = 12

SORTS: dict[str, tuple[str, ...]] = {
    "newest": ("-id",),
    "oldest": ("id",),
    "size": ("-size_bytes", "-id"),
    "steps": ("-n_steps", "-id"),
    "agents": ("-n_agents", "-id"),
    "framework": ("mas_name", "-id"),
}
OUTCOMES = ("success", "failure", "unknown")

# Columns the list shows; everything else (raw_text above all) stays in the database.
LIST_FIELDS = (
    "id",
    "project_id",
    "mas_name",
    "llm_name",
    "benchmark",
    "external_id",
    "title",
    "format",
    "size_bytes",
    "outcome",
    "n_steps",
    "n_agents",
    "n_lines",
    "imported_at",
)
TASK_HEAD_CHARS = 160


@dataclass(frozen=True)
class TraceFilters:
    """The list's query string, validated: unknown values fall back to "no filter"."""

    framework: str = ""
    llm: str = ""
    benchmark: str = ""
    outcome: str = ""  # success / failure / unknown / ""
    labelled: str = ""  # "yes" / "no" / ""
    q: str = ""
    sort: str = "newest"

    @classmethod
    def from_query(cls, data) -> TraceFilters:
        def get(name: str) -> str:
            return (data.get(name) or "").strip()[:300]

        outcome = get("outcome")
        labelled = get("labelled")
        sort = get("sort")
        return cls(
            framework=get("framework"),
            llm=get("llm"),
            benchmark=get("benchmark"),
            outcome=outcome if outcome in OUTCOMES else "",
            labelled=labelled if labelled in ("yes", "no") else "",
            q=get("q"),
            sort=sort if sort in SORTS else "newest",
        )

    def is_filtered(self) -> bool:
        return any((self.framework, self.llm, self.benchmark, self.outcome, self.labelled, self.q))

    def querystring(self, **override) -> str:
        """The filters as a query string (for pagination and sort links), without empty values."""

        values = {
            "framework": self.framework,
            "llm": self.llm,
            "benchmark": self.benchmark,
            "outcome": self.outcome,
            "labelled": self.labelled,
            "q": self.q,
            "sort": self.sort if self.sort != "newest" else "",
        }
        values.update(override)
        return urlencode({k: v for k, v in values.items() if v})


def trace_list_for_user(*, user, project: Project, filters: TraceFilters | None = None) -> QuerySet[Trace]:
    """Traces of a project the user may view, filtered and sorted (404 for non-members).

    Rows carry only the list's columns plus ``task_head`` (the first characters of the task);
    ``is_labelled`` is in the SELECT only when the list filters on it. Otherwise call
    ``trace_rows_mark_labelled`` on the page's rows (one query for the page, where an EXISTS per
    row made PostgreSQL hash every annotation of a 100,000-trace project). The role check is
    cached on the user by project_get_for_user, so it costs no query after it.
    """
    if not user_can(user=user, project=project, capability="view"):
        raise Http404("No such project.")
    f = filters or TraceFilters()
    qs = Trace.objects.filter(project=project).only(*LIST_FIELDS).annotate(task_head=Substr("task", 1, TASK_HEAD_CHARS))
    if f.labelled:
        qs = qs.annotate(is_labelled=trace_label_state(user=user, project=project))
    if f.framework:
        qs = qs.filter(mas_name=f.framework)
    if f.llm:
        qs = qs.filter(llm_name=f.llm)
    if f.benchmark:
        qs = qs.filter(benchmark=f.benchmark)
    if f.outcome:
        qs = qs.filter(outcome="" if f.outcome == "unknown" else f.outcome)
    if f.labelled == "yes":
        qs = qs.filter(is_labelled=True)
    elif f.labelled == "no":
        qs = qs.filter(is_labelled=False)
    if f.q:
        q = Q(external_id__icontains=f.q) | Q(title__icontains=f.q) | Q(task__icontains=f.q)
        if f.q.isdigit():
            q |= Q(pk=int(f.q))
        qs = qs.filter(q)
    return qs.order_by(*SORTS[f.sort])


class CappedCountPaginator(Paginator):
    """A Paginator whose count stops at ``count_cap`` rows (free-text search can match thousands
    of traces, and counting them all means reading every task; a LIMITed count stops early).
    ``count_capped`` says whether the true count may be larger."""

    count_cap = 1000
    count_capped = False

    @cached_property
    def count(self) -> int:
        n = self.object_list[: self.count_cap + 1].count()
        self.count_capped = n > self.count_cap
        return min(n, self.count_cap)


def trace_rows_mark_labelled(*, user, project: Project, rows) -> list[Trace]:
    """The page's rows as a list, each with ``is_labelled`` set (one query, none when the list
    already filtered on it)."""
    rows = list(rows)
    todo = [t for t in rows if not hasattr(t, "is_labelled")]
    labelled = trace_label_state_of(user=user, project=project, trace_ids=[t.pk for t in todo])
    for t in todo:
        t.is_labelled = t.pk in labelled
    return rows


def trace_paginator(*, qs: QuerySet[Trace], filters: TraceFilters, per_page: int = PAGE_SIZE) -> Paginator:
    """Exact counts normally; a capped count when the list is a free-text search."""
    if filters.q:
        return CappedCountPaginator(qs, per_page)
    return Paginator(qs, per_page)


def trace_filter_choices(*, project: Project) -> dict[str, list[str]]:
    """Distinct framework / LLM / benchmark values of a project, in one query."""
    combos = (
        Trace.objects.filter(project=project).values_list("mas_name", "llm_name", "benchmark").distinct().order_by()
    )
    frameworks, llms, benchmarks = set(), set(), set()
    for mas, llm, bench in combos:
        frameworks.add(mas)
        llms.add(llm)
        benchmarks.add(bench)
    return {
        "framework": sorted(v for v in frameworks if v),
        "llm": sorted(v for v in llms if v),
        "benchmark": sorted(v for v in benchmarks if v),
    }


# ---------------------------------------------------------------- one trace


def trace_get(*, project: Project, pk: int) -> Trace:
    """One trace of the project without its raw text (404 when it is not in this project), with
    ``live_changed``: spans of it came live after it was labelled (traces.live.assembly)."""
    changed = LiveTrace.objects.filter(trace=OuterRef("pk"), changed_after_labelling=True)
    qs = Trace.objects.defer("raw_text").select_related("project").annotate(live_changed=Exists(changed))
    return get_object_or_404(qs, project=project, pk=pk)


# a span step's parent, model, tokens and timing come along (null / "" on flat traces)
STEP_WINDOW_FIELDS = ("id", "trace_id", "index", "agent", "recipient", "kind", "content", "line_start", "line_end")
STEP_WINDOW_FIELDS += Step.TREE_FIELDS


def trace_steps_window(
    *, trace: Trace, start: int = 0, limit: int = 60, max_lines: int | None = None
) -> list[Step]:
    """Steps ``start .. start+limit-1`` in order; with ``max_lines``, stop once that many lines are
    in the window (always at least one step)."""
    start = max(0, int(start))
    limit = max(1, min(int(limit), STEPS_WINDOW_MAX))
    steps = list(Step.objects.filter(trace=trace, index__gte=start).order_by("index").only(*STEP_WINDOW_FIELDS)[:limit])
    if max_lines is None:
        return steps
    out, lines = [], 0
    for step in steps:
        if out and lines + (step.line_end - step.line_start + 1) > max_lines:
            break
        out.append(step)
        lines += step.line_end - step.line_start + 1
    return out


def agent_hue(agent: str) -> int:
    """A stable hue (0-359) for an agent name: the same agent has the same colour everywhere."""
    if not agent:
        return -1  # no agent (preamble, logs): grey
    return (zlib.crc32(agent.strip().lower().encode("utf-8")) * 137) % 360


def agent_hues(agents) -> dict[str, int]:
    """Hues for a trace's agents: each starts at its stable hash hue and moves on (by a fixed step)
    while it sits too close to an agent before it in name order, so that the agents of one trace
    stay distinguishable. Deterministic for a given set of agent names."""
    taken: list[int] = []
    out: dict[str, int] = {"": -1}
    for agent in sorted({a for a in agents if a}):
        hue = agent_hue(agent)
        for _ in range(16):
            if all(min(abs(hue - t), 360 - abs(hue - t)) >= 40 for t in taken):
                break
            hue = (hue + 47) % 360
        taken.append(hue)
        out[agent] = hue
    return out


def trace_agent_hues(*, trace: Trace) -> dict[str, int]:
    """The hues of a trace's agents. The importer stores the distinct agent names on the trace
    (``Trace.agents``), so this costs no query; rows written another way fall back to the steps."""
    if trace.agents and len(trace.agents) == trace.n_agents:
        return agent_hues(trace.agents)
    return agent_hues(Step.objects.filter(trace=trace).values_list("agent", flat=True).distinct().order_by())


def long_line_control(offset: int, length: int) -> str:
    """The control after the piece of a long line on show (trace-viewer.js builds the same)."""
    end = min(offset + LINE_PIECE, length)
    first, last = (" disabled" if offset == 0 else ""), (" disabled" if end >= length else "")
    return (
        f'<span class="tv-long muted small" data-length="{int(length)}">'
        f" characters {offset + 1:,}\u2013{end:,} of {length:,} "
        f'<button type="button" class="tv-long-go btn btn-small" data-to="prev"{first}>previous</button> '
        f'<button type="button" class="tv-long-go btn btn-small" data-to="next"{last}>next</button> '
        f'<button type="button" class="tv-long-go btn btn-small" data-to="end"{last}>end</button></span>'
    )


@dataclass(frozen=True)
class StepView:
    """A step as the viewer template renders it: numbered lines, collapsed when long."""

    index: int
    agent: str
    kind: str
    line_start: int
    line_end: int
    hue: int
    lines: list[tuple[int, str]]  # the lines rendered now (the head when collapsed)
    collapsed: bool
    recipient: str = ""

    @property
    def n_lines(self) -> int:
        return self.line_end - self.line_start + 1

    @property
    def kind_label(self) -> str:
        return Step.Kind(self.kind).label if self.kind in Step.Kind.values else self.kind

    @property
    def lines_html(self) -> SafeString:
        """The numbered lines as markup, every line's text escaped. Built here rather than by a
        template loop: the template engine spent ~2 ms per 100 lines localizing line numbers."""
        return mark_safe(  # noqa: S308 - every piece of text below goes through escape()
            "".join(
                f'<span class="tv-line" data-line="{no}"><span class="tv-ln" aria-hidden="true">{no}</span>'
                + (
                    f'<span class="tv-tx">{escape(text)}</span></span>'
                    if len(text) <= LINE_PIECE
                    else f'<span class="tv-tx" data-offset="0">{escape(text[:LINE_PIECE])}</span>'
                    f"{long_line_control(0, len(text))}</span>"
                )
                for no, text in self.lines
            )
        )


    @property
    def card_html(self) -> SafeString:
        """The whole step card (``_step.html``; trace-viewer.js's renderStep builds the same markup),
        in Python for the reason of ``lines_html``: a card's dozen variables through the template
        engine cost the labelling page ~0.2 ms a step. Every piece of text goes through escape()."""
        classes = "tv-step" + (" is-collapsed" if self.collapsed else "") + (" no-agent" if self.hue < 0 else "")
        agent = f'<span class="tv-agent">{escape(self.agent)}</span>' if self.agent else ""
        if self.recipient:
            agent += f' <span class="tv-recipient" title="addressed to">\u2192 {escape(self.recipient)}</span>'
        expand = (
            f'<button type="button" class="tv-expand btn btn-small">Show all {self.n_lines} lines</button>'
            if self.collapsed
            else ""
        )
        i = int(self.index)
        return mark_safe(  # noqa: S308 - numbers are ints, text goes through escape()
            f'<article class="{classes}" id="step-{i}" data-step="{i}" data-line-start="{int(self.line_start)}"'
            f' data-line-end="{int(self.line_end)}" style="--h: {int(self.hue)}">\n'
            '  <header class="tv-step-head">\n'
            f"    {agent}\n"
            f'    <span class="tv-kind tv-kind-{escape(self.kind)}">{escape(self.kind_label)}</span>\n'
            '    <span class="tv-marks"></span>\n'
            '    <span class="spacer"></span>\n'
            f'    <a class="tv-step-link muted small" href="#step-{i}" title="Permalink to this step">#{i}</a>\n'
            f'    <span class="tv-lines-range muted small">L{int(self.line_start)}\u2013L{int(self.line_end)}</span>\n'
            "  </header>\n"
            f'  <pre class="tv-pre">{self.lines_html}</pre>\n'
            f"  {expand}\n"
            "</article>"
        )


def step_view(step: Step, *, hue: int | None = None) -> StepView:
    lines = step.content.split("\n")
    collapsed = len(lines) > COLLAPSE_OVER_LINES
    shown = lines[:COLLAPSED_HEAD] if collapsed else lines
    return StepView(
        index=step.index,
        agent=step.agent,
        kind=step.kind,
        line_start=step.line_start,
        line_end=step.line_end,
        hue=agent_hue(step.agent) if hue is None else hue,
        lines=list(enumerate(shown, start=step.line_start)),
        collapsed=collapsed,
        recipient=step.recipient,
    )


@dataclass(frozen=True)
class Outline:
    """Every step of a trace in compact parallel lists (no content): the viewer's map."""

    agents: list[str]
    kinds: list[str]
    agent: list[int]  # per step: index into agents
    kind: list[int]  # per step: index into kinds
    line_start: list[int]
    line_end: list[int]
    hues: dict[str, int]

    def as_json(self) -> dict:
        return {
            "agents": self.agents,
            "kinds": self.kinds,
            "a": self.agent,
            "k": self.kind,
            "ls": self.line_start,
            "le": self.line_end,
            "hues": [self.hues.get(a, -1) for a in self.agents],
        }

    def step_for_line(self, line: int) -> int | None:
        """The step whose line range holds ``line``, else the next step after it (None past the end)."""
        i = bisect_right(self.line_start, line) - 1
        if i >= 0 and self.line_end[i] >= line:
            return i
        return i + 1 if i + 1 < len(self.line_start) else None


def trace_outline(*, trace: Trace) -> Outline:
    rows = Step.objects.filter(trace=trace).order_by("index").values_list("agent", "kind", "line_start", "line_end")
    agents: dict[str, int] = {}
    kinds: dict[str, int] = {}
    a, k, ls, le = [], [], [], []
    for agent, kind, start, end in rows:
        a.append(agents.setdefault(agent, len(agents)))
        k.append(kinds.setdefault(kind, len(kinds)))
        ls.append(start)
        le.append(end)
    return Outline(
        agents=list(agents), kinds=list(kinds), agent=a, kind=k, line_start=ls, line_end=le, hues=agent_hues(agents)
    )


def _rendered_lines(step: Step) -> int:
    n = step.line_end - step.line_start + 1
    return COLLAPSED_HEAD if n > COLLAPSE_OVER_LINES else n


def trace_viewer_context(*, trace: Trace) -> dict:
    """What ``traces/_viewer.html`` needs: the trace and its first window of steps.

    The first window is what fills the first screens (FIRST_WINDOW_STEPS steps, about
    FIRST_WINDOW_LINES rendered lines); the viewer fetches the rest as the reader scrolls. The
    outline (every step's agent and lines: 7,458 steps are ~150 KB of JSON at 20 MB) is not in the
    HTML: the viewer fetches it from the outline API after the text is on screen, and the browser
    keeps it (its URL carries the trace's content hash). ``outline`` stays in the context as None
    so templates that pass it on keep working.
    """
    rows = list(
        Step.objects.filter(trace=trace, index__lt=FIRST_WINDOW_STEPS)
        .order_by("index")
        .only(*STEP_WINDOW_FIELDS)
    )
    steps, lines = [], 0
    for step in rows:
        n = _rendered_lines(step)
        if steps and lines + n > FIRST_WINDOW_LINES:
            break
        steps.append(step)
        lines += n
    hues = trace_agent_hues(trace=trace)
    return {
        "trace": trace,
        "first_steps": [step_view(s, hue=hues.get(s.agent, -1)) for s in steps],
        "outline": None,
        "outline_version": trace_outline_version(trace=trace),
    }


def trace_outline_version(*, trace: Trace) -> str:
    """Changes whenever the outline can: the trace's content and its number of steps."""
    return f"{trace.content_hash[:16]}-{trace.n_steps}"


def outline_json(*, trace: Trace, outline: Outline) -> dict:
    """The outline as the viewer reads it, with the step tree of span-based traces (``tree``)."""
    data = outline.as_json()
    if (tree := trace_tree(trace=trace)) is not None:
        data["tree"] = tree
    return data


def trace_raw_text(*, project: Project, pk: int) -> str:
    return get_object_or_404(Trace.objects.only("id", "raw_text"), project=project, pk=pk).raw_text


@dataclass(frozen=True)
class RawWindow:
    start: int  # first line number shown (1-based)
    lines: list[str]
    total: int
    per_page: int

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    @property
    def numbered(self) -> list[tuple[int, str]]:
        return list(enumerate(self.lines, start=self.start))

    @property
    def prev_start(self) -> int | None:
        return max(1, self.start - self.per_page) if self.start > 1 else None

    @property
    def next_start(self) -> int | None:
        return self.end + 1 if self.end < self.total else None


def trace_raw_lines(*, trace: Trace, start: int = 1, per_page: int = RAW_PAGE_LINES) -> RawWindow:
    """A window of the raw text's lines; ``start`` is clamped into the text."""
    text = Trace.objects.filter(pk=trace.pk).values_list("raw_text", flat=True).get()
    lines = text.split("\n")
    total = len(lines)
    start = min(max(1, int(start)), max(1, total))
    return RawWindow(start=start, lines=lines[start - 1 : start - 1 + per_page], total=total, per_page=per_page)


def raw_page_start(*, line: int, per_page: int = RAW_PAGE_LINES) -> int:
    """The first line of the raw-view page holding ``line`` (pages start at 1, 1+per_page, ...)."""
    return ((max(1, line) - 1) // per_page) * per_page + 1


__all__ = [
    "CappedCountPaginator",
    "Outline",
    "StepView",
    "agent_hue",
    "agent_hues",
    "trace_agent_hues",
    "step_view",
    "RawWindow",
    "TraceFilters",
    "raw_page_start",
    "trace_filter_choices",
    "trace_get",
    "trace_list_for_user",
    "trace_outline",
    "trace_outline_version",
    "trace_paginator",
    "trace_rows_mark_labelled",
    "trace_raw_lines",
    "trace_raw_text",
    "trace_steps_window",
    "trace_viewer_context",
]
