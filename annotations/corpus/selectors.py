"""Corpus search: every step of a project that matches, filtered, grouped by trace.

The matching steps are read from the newest traces' steps first, then from an index on
``traces_step.content`` (words or trigrams, which pick candidates that PostgreSQL's regex engine
rechecks: ``query.py``; ``finding.matching_steps`` says when each is used), joined to their traces
for the project and the trace filters; at most ``HIT_CAP`` steps are read. Under the cap every count is exact; over
it the answer says so and counts what it read (the list and the facets then cover the
``HIT_CAP`` steps read, the newest traces' first). The loop's actions read up to ``ACTION_CAP``
steps (a second or two at 20 M steps, where a search must answer while one types) and refuse to
run on more: narrow the search first.

Label filters (a mode present or absent in the agreed labels or in one rater's) read the label
matrix the dashboard reads (``label_matrix_cached``), which applies the blind rule for the user;
a source she may not see is refused like an unknown one, so no filter can tell her anything the
dashboard would not.

Snippets are cut in PostgreSQL (``regexp_instr`` + ``substr``) for the steps of the page only, so a
match in a 20 MB tool output sends ~1 KB, never the step.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlencode

import numpy as np
from django.core.cache import cache
from django.db import connection

from annotations.analytics.selectors import (
    AGREED,
    MATRIX_SECONDS,
    dashboard_sources,
    label_matrix_cached,
    labels_fingerprint,
    project_trace_facts,
)
from annotations.corpus.finding import matching_steps
from annotations.corpus.query import MODES, CompiledQuery, QueryError, query_compile
from annotations.models import Round
from traces.models import Project, Step, Trace
from traces.search.indexing import search_backlog
from traces.viewer.selectors import trace_filter_choices

HIT_CAP = 2_000  # matching steps a search reads (bench/bench_corpus.py: each costs a heap read)
ACTION_CAP = 10_000  # matching steps a loop action reads
TRACES_PER_PAGE = 20
HITS_PER_TRACE = 3  # step snippets shown per trace (the trace's count says how many more)
_WINDOW = 360  # characters each side of a hit that a snippet may use
_LINE = 160  # characters of a line shown around a hit
KINDS = ("message", "tool_call", "tool_output", "system", "log")
OUTCOMES = ("success", "failure", "unknown")
FACETS = ("framework", "llm", "outcome", "agent", "kind")


@dataclass(frozen=True)
class LabelFilter:
    source: str  # "agreed" or a rater id
    code: str
    present: bool

    @classmethod
    def parse(cls, value: str) -> LabelFilter:
        parts = str(value).split(":")
        if len(parts) != 3 or parts[2] not in ("present", "absent") or not parts[0] or not parts[1]:
            raise QueryError(f"Label filter {value[:60]!r}: write it as <source>:<mode code>:present|absent.")
        return cls(parts[0], parts[1], parts[2] == "present")

    def __str__(self) -> str:
        return f"{self.source}:{self.code}:{'present' if self.present else 'absent'}"


@dataclass(frozen=True)
class CorpusQuery:
    """A search as the page's and the API's query string give it, validated."""

    q: str = ""
    mode: str = "words"
    agent: str = ""
    kind: str = ""
    framework: str = ""
    llm: str = ""
    outcome: str = ""
    round: int | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    labels: tuple[LabelFilter, ...] = ()

    @classmethod
    def from_query(cls, data) -> CorpusQuery:
        """From a QueryDict or a dict; ``QueryError`` names the parameter that cannot be used."""

        def get(name: str) -> str:
            return str(data.get(name) or "").strip()[:300]

        mode = get("mode") or "words"
        if mode not in MODES:
            raise QueryError(f"mode: use one of {', '.join(MODES)}.")
        kind, outcome = get("kind"), get("outcome")
        if kind and kind not in KINDS:
            raise QueryError(f"kind: use one of {', '.join(KINDS)}.")
        if outcome and outcome not in OUTCOMES:
            raise QueryError(f"outcome: use one of {', '.join(OUTCOMES)}.")
        round_id = None
        if get("round"):
            if not get("round").isdigit():
                raise QueryError("round: a round id (a number).")
            round_id = int(get("round"))
        dates = {}
        for name in ("from", "to"):
            if get(name):
                try:
                    dates[name] = dt.date.fromisoformat(get(name))
                except ValueError:
                    raise QueryError(f"{name}: a date as YYYY-MM-DD.") from None
        raw_labels = data.getlist("label") if hasattr(data, "getlist") else data.get("label") or []
        if isinstance(raw_labels, str):
            raw_labels = [raw_labels]
        raw_labels = [str(v) for v in raw_labels if str(v).strip()]
        if get("label_code"):  # the page's "add a label filter" fields
            raw_labels.append(
                f"{get('label_source') or AGREED}:{get('label_code')}:{get('label_present') or 'present'}"
            )
        labels = tuple(dict.fromkeys(LabelFilter.parse(v) for v in raw_labels))
        return cls(
            q=str(data.get("q") or "")[:400], mode=mode, agent=get("agent"), kind=kind, framework=get("framework"),
            llm=get("llm"), outcome=outcome, round=round_id, date_from=dates.get("from"),
            date_to=dates.get("to"), labels=labels,
        )  # fmt: skip

    def compiled(self) -> CompiledQuery:
        return query_compile(self.q, self.mode)

    def params(self, **override) -> dict:
        values: dict = {
            "q": self.q, "mode": self.mode if self.mode != "words" else "", "agent": self.agent, "kind": self.kind,
            "framework": self.framework, "llm": self.llm, "outcome": self.outcome, "round": self.round or "",
            "from": self.date_from.isoformat() if self.date_from else "",
            "to": self.date_to.isoformat() if self.date_to else "",
        }  # fmt: skip
        values.update(override)
        out = {k: v for k, v in values.items() if v not in ("", None)}
        if self.labels:
            out["label"] = [str(f) for f in self.labels]
        return out

    def querystring(self, **override) -> str:
        return urlencode(self.params(**override), doseq=True)

    def as_dict(self) -> dict:
        """JSON-safe, as stored with what a search became (an open code, a sample)."""
        return self.params()


@dataclass
class StepHit:
    trace_id: int
    index: int
    agent: str
    kind: str
    before: str = ""  # the line before the hit's line
    line: list[tuple[str, bool]] = field(default_factory=list)  # the hit's line: (text, highlighted)
    after: str = ""


@dataclass
class TraceHits:
    trace_id: int
    title: str
    framework: str
    llm: str
    outcome: str
    n_steps: int  # the trace's matching steps
    hits: list[StepHit] = field(default_factory=list)


@dataclass
class CorpusResult:
    query: CorpusQuery
    n_steps: int  # matching steps (at most HIT_CAP + 1 read)
    n_traces: int
    capped: bool
    traces: list[TraceHits]  # this page
    page: int
    n_pages: int
    facets: dict[str, list[tuple[str, int, int]]]  # name -> (value, steps, traces), most steps first
    trace_ids: list[int]  # every trace with a hit (newest first), under the cap
    waiting: int = 0  # the project's traces with steps not searchable yet (just imported)


def _label_trace_ids(*, user, project: Project, labels: tuple[LabelFilter, ...]) -> np.ndarray | None:
    """The traces every label filter keeps, through the label matrix (the blind rule applied). Each
    filter's traces are cached under the matrix's own key (``labels_fingerprint``: a new key after
    any label, trace or visibility change), so a search does not unpickle a million-row matrix."""
    if not labels:
        return None
    allowed = {value for value, _ in dashboard_sources(user=user, project=project)}
    facts = project_trace_facts(project=project)
    keep: np.ndarray | None = None
    for f in labels:
        if f.source not in allowed:
            raise QueryError(f"label: no label source {f.source[:40]!r} you may see.")
        fingerprint = labels_fingerprint(user=user, project=project, source=f.source, facts_of_traces=facts)
        key = f"mast:corpus-label-traces:{fingerprint}:{f.code}:{int(f.present)}"
        ids = cache.get(key)
        if ids is None:
            M = label_matrix_cached(user=user, project=project, source=f.source, facts=facts, fingerprint=fingerprint)
            if f.code not in M.codes:
                raise QueryError(f"label: no mode {f.code[:20]!r} in {project.taxonomy_version}.")
            ids = M.trace_ids[M.X[:, M.codes.index(f.code)] == (1 if f.present else 0)]
            cache.set(key, ids, MATRIX_SECONDS)
        keep = ids if keep is None else np.intersect1d(keep, ids)
    return keep


def _facets(rows: list[tuple]) -> dict[str, list[tuple[str, int, int]]]:
    out: dict[str, list[tuple[str, int, int]]] = {}
    for name, col in zip(FACETS, (4, 5, 6, 2, 3), strict=True):
        steps: Counter = Counter()
        traces: dict[str, set[int]] = defaultdict(set)
        for r in rows:
            value = r[col] if not (name == "outcome" and r[col] == "") else "unknown"
            steps[value] += 1
            traces[value].add(r[0])
        out[name] = [(v, n, len(traces[v])) for v, n in steps.most_common()]
    return out


def corpus_search(*, user, project: Project, query: CorpusQuery, page: int = 1, cap: int | None = None) -> CorpusResult:
    """The search's matching steps grouped by trace (newest trace first), one page of them with
    snippets, the counts per trace and per filter value. ``QueryError`` when it cannot run.
    ``cap``: the matching steps read (default ``HIT_CAP``)."""
    cap = cap or HIT_CAP
    compiled = query.compiled()
    if query.round and not Round.objects.filter(pk=query.round, project=project).exists():
        raise QueryError(f"round: no round {query.round} in this project.")
    ids = _label_trace_ids(user=user, project=project, labels=query.labels)
    if ids is not None and not len(ids):
        rows: list[tuple] = []
    else:
        rows = matching_steps(query, compiled, project=project, ids=ids, cap=cap + 1)
    capped = len(rows) > cap
    rows = rows[:cap]
    per_trace: dict[int, list[tuple]] = defaultdict(list)
    for r in rows:
        per_trace[r[0]].append(r)
    trace_ids = sorted(per_trace, reverse=True)
    n_pages = max(1, -(-len(trace_ids) // TRACES_PER_PAGE))
    page = min(max(1, page), n_pages)
    shown = trace_ids[(page - 1) * TRACES_PER_PAGE : page * TRACES_PER_PAGE]
    titles = dict(Trace.objects.filter(pk__in=shown).values_list("pk", "title"))
    groups = []
    for tid in shown:
        steps = sorted(per_trace[tid], key=lambda r: r[1])
        first = steps[0]
        groups.append(TraceHits(tid, titles.get(tid, ""), first[4], first[5], first[6] or "unknown", len(steps),
                                [StepHit(tid, r[1], r[2], r[3]) for r in steps[:HITS_PER_TRACE]]))  # fmt: skip
    _snippets(groups, compiled)
    waiting = search_backlog(project=project)
    return CorpusResult(query, len(rows), len(trace_ids), capped, groups, page, n_pages, _facets(rows), trace_ids,
                        waiting)  # fmt: skip


def _snippets(groups: list[TraceHits], compiled: CompiledQuery) -> None:
    hits = [h for g in groups for h in g.hits]
    if not hits:
        return
    keys = [(h.trace_id, h.index) for h in hits]
    sql = (
        "WITH k(trace_id, idx) AS (SELECT * FROM unnest(%s::bigint[], %s::int[])), "
        "p AS (SELECT s.trace_id, s.index, s.content, regexp_instr(s.content, %s, 1, 1, 0, 'i') AS pos "
        "FROM traces_step s JOIN k ON s.trace_id = k.trace_id AND s.index = k.idx) "
        "SELECT trace_id, index, greatest(pos - %s, 1) AS lo, pos, "
        "substr(content, greatest(pos - %s, 1), %s) FROM p"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [[k[0] for k in keys], [k[1] for k in keys], compiled.highlight, _WINDOW, _WINDOW,
                          2 * _WINDOW + len(compiled.text) + 200])  # fmt: skip
        windows = {(r[0], r[1]): (r[3] - r[2], r[4]) for r in cur.fetchall()}
    patterns = _highlighters(compiled)
    for h in hits:
        offset, text = windows.get((h.trace_id, h.index), (0, ""))
        h.before, h.line, h.after = _cut(text, max(offset, 0), patterns)


def _highlighters(compiled: CompiledQuery) -> list[re.Pattern[str]]:
    try:
        return compiled.python_patterns() if compiled.mode != "regex" else [re.compile(compiled.text, re.I)]
    except re.error:
        return []


def _cut(text: str, offset: int, patterns: list[re.Pattern[str]]) -> tuple[str, list[tuple[str, bool]], str]:
    """The hit's line (around the hit, its matches marked) with the lines before and after it."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end == -1 else end
    prev_start = text.rfind("\n", 0, max(start - 1, 0)) + 1 if start else start
    before = text[prev_start : max(start - 1, prev_start)] if start else ""
    nxt = text.find("\n", end + 1)
    after = text[end + 1 : len(text) if nxt == -1 else nxt] if end < len(text) else ""
    lo = max(start, offset - _LINE // 3)
    line = text[lo : min(end, lo + _LINE)]
    marked = _mark(line, offset - lo, patterns)
    if lo > start:
        marked.insert(0, ("…", False))
    if lo + _LINE < end:
        marked.append(("…", False))
    return before[-_LINE:], marked, after[:_LINE]


def _mark(line: str, at: int, patterns: list[re.Pattern[str]]) -> list[tuple[str, bool]]:
    spans = sorted({m.span() for p in patterns for m in p.finditer(line) if m.end() > m.start()})
    if not spans:  # the regex dialects disagree: mark where PostgreSQL found it
        spans = [(at, at)]
    out: list[tuple[str, bool]] = []
    pos = 0
    for a, b in spans:
        if a < pos:
            continue
        if a > pos:
            out.append((line[pos:a], False))
        if b > a:
            out.append((line[a:b], True))
        pos = b
    if pos < len(line):
        out.append((line[pos:], False))
    return out


def corpus_trace_ids(*, user, project: Project, query: CorpusQuery) -> list[int]:
    """Every trace with a hit, for the loop's actions and behaviour searches."""
    return _all_traces(corpus_search(user=user, project=project, query=query, cap=ACTION_CAP))


def _all_traces(result: CorpusResult) -> list[int]:
    """``QueryError`` when the search is over the cap (an action on "the first 10,000 steps found"
    would act on an arbitrary part of the hits)."""
    if result.capped:
        raise QueryError(
            f"More than {ACTION_CAP:,} steps match: narrow the search before turning it into a code or a sample."
        )
    return result.trace_ids


def corpus_filter_choices(*, project: Project) -> dict[str, list]:
    """Values offered by the page's filters: the trace list's frameworks and LLMs (its one DISTINCT,
    served by its index), and the rounds."""
    choices: dict[str, list] = dict(trace_filter_choices(project=project))
    choices["round"] = list(Round.objects.filter(project=project).order_by("-pk").values_list("pk", "name"))
    return choices


def corpus_label_sources(*, user, project: Project) -> list[tuple[str, str]]:
    return dashboard_sources(user=user, project=project)


__all__ = [
    "AGREED",
    "ACTION_CAP",
    "HIT_CAP",
    "CorpusQuery",
    "CorpusResult",
    "LabelFilter",
    "QueryError",
    "Step",
    "corpus_filter_choices",
    "corpus_label_sources",
    "corpus_search",
    "corpus_trace_ids",
]


def _line_text(hit: StepHit) -> str:
    return "".join(text for text, _ in hit.line).strip("…").strip()


def action_source(*, user, project: Project, data) -> tuple[list[int], list[dict], dict]:
    """What a loop action acts on: the traces and example lines of a corpus search (``data`` has its
    query parameters) or of a behaviour search's hits (``behaviour=<id>``, optionally ``group=<n>``),
    and the JSON stored with the action. ``QueryError`` when it cannot be used."""
    from annotations.models import BehaviourSearch

    behaviour = str(data.get("behaviour") or "").strip()
    if behaviour:
        if not behaviour.isdigit():
            raise QueryError("behaviour: a behaviour search id.")
        search = BehaviourSearch.objects.filter(project=project, pk=int(behaviour)).first()
        if search is None or not behaviour_visible(user=user, search=search):
            raise QueryError(f"behaviour: no behaviour search {behaviour} here.")
        hits = behaviour_hits_visible(user=user, search=search).filter(present=True)
        group = str(data.get("group") or "").strip()
        if group:
            hits = hits.filter(group__number=int(group) if group.isdigit() else -1)
        rows = list(hits.values_list("trace_id", "quotes"))
        lines = [{"trace": t, "step": q["step"], "agent": "", "text": q["quote"]}
                 for t, quotes in rows for q in quotes if q.get("found")]  # fmt: skip
        return [t for t, _ in rows], lines, {"behaviour": search.pk, "group": group}
    query = CorpusQuery.from_query(data)
    result = corpus_search(user=user, project=project, query=query, cap=ACTION_CAP)
    ids = _all_traces(result)
    lines = [{"trace": h.trace_id, "step": h.index, "agent": h.agent, "text": _line_text(h)}
             for g in result.traces for h in g.hits[:1]]  # fmt: skip
    return ids, lines, query.as_dict()


def behaviour_hits_visible(*, user, search):
    """The search's hits, best first, without the traces the user labels blind now (what a judge
    found in them is another rater's work on them)."""
    from annotations.labels.visibility import blind_trace_ids
    from annotations.models import BehaviourHit

    return (
        BehaviourHit.objects.filter(search=search)
        .exclude(trace_id__in=blind_trace_ids(user=user, project=search.project))
        .select_related("group")
        .order_by("-score", "trace_id")
    )


def behaviour_visible(*, user, search) -> bool:
    """Behaviour searches are the managers' (they cost money and read any trace); members who are
    not managers see none: a search's hits over traces they label blind would say what a judge
    found there."""
    from traces.projects.selectors import user_can

    return user_can(user=user, project=search.project, capability="manage")
