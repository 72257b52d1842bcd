"""Corpus search: its answers equal a brute-force scan of every step (words, phrases, prefixes,
regular expressions, each filter), the counts per trace and per filter value, the refusals, and
the API. The corpus is the project's own demo traces (seven frameworks, imported by the importer)
plus a trace of edge cases (URLs, underscores, case, a word inside another)."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotations.corpus.query import (
    QueryError,
    query_compile,
    required_literal,
    word_exact,
    word_literal,
    word_only,
)
from annotations.corpus.selectors import CorpusQuery, corpus_search
from tests.annotations.releases_factories import make_trace
from traces.importing.service import traces_import
from traces.models import Step, Trace
from traces.search.indexing import search_backlog, steps_index_pending

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[3] / "traces" / "demo_data"
EDGE = [
    ("Planner", "message", "See https://example.com/approved/path for the plan"),
    ("Verifier", "message", "approved_by: admin (not the word alone)"),
    ("Verifier", "message", "APPROVED! The unit tests pass."),
    ("Coder", "tool_call", "run unit-tests --fast; unapproved changes stay"),
    ("Coder", "tool_output", "def snake_game():\n    assert score == 0\n  unit\n\ttests ok"),
    ("Reviewer", "message", "Größe approved\nnext line"),
    # a run of word characters too long for the word index (step_long_words), "intake" inside it
    ("Coder", "tool_output", "blob " + "a1" * 60 + "intake_" + "b" * 10 + " end; Maintain the INTAKE"),
]


@pytest.fixture
def corpus(project):
    traces_import(project=project, paths_or_files=[DEMO])
    edge = make_trace(project, mas_name="EdgeFW", llm_name="edge-llm", raw_text="\n".join(c for _, _, c in EDGE),
                      outcome="failure")  # fmt: skip
    line = 1
    for i, (agent, kind, content) in enumerate(EDGE):
        n = content.count("\n")
        Step.objects.create(trace=edge, index=i, agent=agent, kind=kind, content=content, line_start=line,
                            line_end=line + n)  # fmt: skip
        line += n + 1
    Trace.objects.filter(pk=edge.pk).update(imported_at=timezone.now() - dt.timedelta(days=40), n_steps=len(EDGE))
    assert Trace.objects.filter(project=project).count() > 8
    assert steps_index_pending() == Step.objects.count()  # new steps wait for the indexer
    with connection.cursor() as cur:
        cur.execute("ANALYZE traces_step")  # the word index's most common words (finding._common_share)
    return edge


def brute(project, query: CorpusQuery, *, keep=None) -> set[tuple[int, int]]:
    """Every (trace, step) whose step matches, read one by one in Python."""
    patterns = query.compiled().python_patterns() if query.mode != "regex" else [re.compile(query.q, re.I)]
    out = set()
    for s in Step.objects.filter(trace__project=project).select_related("trace").iterator():
        t = s.trace
        checks = [
            not query.agent or s.agent == query.agent,
            not query.kind or s.kind == query.kind,
            not query.framework or t.mas_name == query.framework,
            not query.llm or t.llm_name == query.llm,
            not query.outcome or (t.outcome or "unknown") == query.outcome,
            not query.date_from or t.imported_at.date() >= query.date_from,
            keep is None or t.pk in keep,
        ]
        if all(checks) and all(p.search(s.content) for p in patterns):
            out.add((t.pk, s.index))
    return out


def found(user, project, query: CorpusQuery) -> set[tuple[int, int]]:
    """Every (trace, step) the search returns, read through every page's groups' counts and the
    complete hit list of each trace (hits beyond the three shown per trace come from page rows)."""
    result = corpus_search(user=user, project=project, query=query)
    assert not result.capped
    pairs = set()
    for page in range(1, result.n_pages + 1):
        r = corpus_search(user=user, project=project, query=query, page=page)
        for g in r.traces:
            pairs.update((g.trace_id, h.index) for h in g.hits)
            assert len(g.hits) == min(3, g.n_steps)
    total = sum(n for _v, n, _t in result.facets["kind"])
    assert total == result.n_steps
    return pairs, result


QUERIES = [
    ("approved", "words"),
    ("unit tests", "words"),
    ("unit tests", "phrase"),
    ("verif", "prefix"),
    ("the code", "phrase"),
    ("def \\w+_game", "regex"),
    ("assert.*score", "regex"),
    ("https?://[a-z.]+/approved", "regex"),
    ("\\bapproved\\b", "regex"),  # a word edge written the Python way (PostgreSQL's \b is a backspace)
    ("error", "words"),
    ("task", "prefix"),
    ("ok", "words"),  # a short word: a key of the word index
    ("of the", "phrase"),
    # matches of word characters only: looked up among the vocabulary's words (finding.vocabulary_lookups)
    ("inta\\w+", "regex"),
    ("\\bmaint[a-z]*", "regex"),
    ("(appro|unappro)ved\\b", "regex"),
    ("^def", "regex"),
    # not of word characters only: the words holding their longest run of them (finding.vocabulary_lookups)
    ("inta[^ ]+", "regex"),
    ("unit.tests", "regex"),
    ("score ?== ?0", "regex"),
    # a whole word in every match, however short: looked up as that word (query.word_exact)
    ("\\.py\\b", "regex"),
    ("-tests\\s", "regex"),
    ("\\s==\\s0\\b", "regex"),
]
WHOLE_WORDS = [
    (t, m) for t, m in QUERIES if m in ("words", "phrase") or (m == "regex" and word_exact(t.replace("\\b", "\\y")))
]


@pytest.fixture(params=["window", "window+index", "index"])
def way(request, monkeypatch):
    """Which way the steps are found (finding.matching_steps): the demo corpus fits the newest
    window whole; a window of one trace (then a second one) leaves the rest to the index."""
    from annotations.corpus import finding

    if request.param != "window":
        monkeypatch.setattr(finding, "WINDOW_BYTES", 1)
        monkeypatch.setattr(finding, "MORE_BYTES", 0 if request.param == "index" else 10**12)
        monkeypatch.setattr(finding, "COMMON_BYTES", 0 if request.param == "index" else 10**12)
    return request.param


@pytest.mark.parametrize("text,mode", QUERIES)
def test_search_equals_a_scan_of_every_step(corpus, project, manager, text, mode, way):
    _equals_a_scan(project, manager, CorpusQuery(q=text, mode=mode))


@pytest.mark.parametrize("text,mode", WHOLE_WORDS)
def test_search_equals_a_scan_the_oldest_way(corpus, project, manager, monkeypatch, text, mode):
    """The "oldest" way: windows of a few traces, newest and (for a word the statistics know as common)
    oldest, the index between them (searches with whole words only: the others never read the oldest)."""
    from annotations.corpus import finding

    monkeypatch.setattr(finding, "WINDOW_BYTES", 1)
    monkeypatch.setattr(finding, "MORE_BYTES", 20_000)
    monkeypatch.setattr(finding, "COMMON_BYTES", 20_000)
    monkeypatch.setattr(finding, "STEP_BYTES", 1)
    _equals_a_scan(project, manager, CorpusQuery(q=text, mode=mode))


def _equals_a_scan(project, manager, query: CorpusQuery) -> None:
    pairs, result = found(manager, project, query)
    expected = brute(project, query)
    shown = {p for p in pairs}
    assert shown <= expected
    # every matching trace is listed, with its count of matching steps
    per_trace = Counter(t for t, _ in expected)
    assert result.n_steps == len(expected)
    assert set(result.trace_ids) == set(per_trace)
    for page in range(1, result.n_pages + 1):
        for g in corpus_search(user=manager, project=project, query=query, page=page).traces:
            assert g.n_steps == per_trace[g.trace_id]
            assert [h.index for h in g.hits] == sorted(i for t, i in expected if t == g.trace_id)[:3]


@pytest.mark.parametrize("regex", [False, True])
def test_a_common_word_is_read_from_the_oldest_traces_then_the_index(corpus, project, manager, monkeypatch, regex):
    """A word the word index's statistics know as common is read from the oldest traces one by one
    (no bitmap of its many steps), the traces between them and the newest window from the index:
    every match, as a scan finds them. So is a regex holding it whole (after a space, before a
    word edge)."""
    from django.test.utils import CaptureQueriesContext

    from annotations.corpus import finding

    with connection.cursor() as cur:
        cur.execute(
            "SELECT w, f FROM pg_stats, unnest(most_common_elems::text::text[], most_common_elem_freqs) AS x(w, f) "
            "WHERE tablename = 'step_words_gin' AND w ~ '^[a-z]{3,}$' ORDER BY f DESC LIMIT 1"
        )
        word, share = cur.fetchone()
    assert share > 0.05
    monkeypatch.setattr(finding, "WINDOW_BYTES", 1)
    monkeypatch.setattr(finding, "MORE_BYTES", 20_000)
    monkeypatch.setattr(finding, "COMMON_BYTES", 20_000)
    monkeypatch.setattr(finding, "STEP_BYTES", 1)
    query = CorpusQuery(q=f"\\s{word}\\b", mode="regex") if regex else CorpusQuery(q=word)
    with CaptureQueriesContext(connection) as ctx:
        pairs, result = found(manager, project, query)
    sql = [q["sql"] for q in ctx.captured_queries]
    assert any("ORDER BY s.trace_id ASC" in q for q in sql) and any("MATERIALIZED" in q for q in sql)
    expected = brute(project, query)
    assert pairs <= expected and result.n_steps == len(expected)
    assert set(result.trace_ids) == {t for t, _ in expected}


def test_word_search_knows_word_edges(corpus, project, manager):
    pairs, _ = found(manager, project, CorpusQuery(q="approved"))
    edge = {i for t, i in pairs if t == corpus.pk}
    # the URL's path word, APPROVED!, "Größe approved"; not approved_by, not unapproved
    assert edge == {0, 2, 5}


@pytest.mark.parametrize(
    "filters",
    [
        {"agent": "Verifier"},
        {"kind": "tool_output"},
        {"framework": "EdgeFW"},
        {"llm": "edge-llm"},
        {"outcome": "failure"},
        {"outcome": "unknown"},
        {"date_from": dt.date.today() - dt.timedelta(days=2)},
    ],
)
def test_filters_equal_a_scan(corpus, project, manager, filters, way):
    for text, mode in (("approved", "words"), ("unit tests", "phrase"), ("task", "prefix")):
        query = CorpusQuery(q=text, mode=mode, **filters)
        result = corpus_search(user=manager, project=project, query=query)
        expected = brute(project, query)
        assert result.n_steps == len(expected), (filters, text)
        assert set(result.trace_ids) == {t for t, _ in expected}


def test_facet_counts_equal_a_scan(corpus, project, manager):
    query = CorpusQuery(q="task", mode="prefix")
    result = corpus_search(user=manager, project=project, query=query)
    expected = brute(project, query)
    frameworks = dict(Trace.objects.filter(project=project).values_list("pk", "mas_name"))
    steps = Counter(frameworks[t] for t, _ in expected)
    traces = Counter(frameworks[t] for t in {t for t, _ in expected})
    assert {v: (n, t) for v, n, t in result.facets["framework"]} == {v: (steps[v], traces[v]) for v in steps}


def test_snippet_marks_the_hit_with_a_line_of_context(corpus, project, manager):
    result = corpus_search(user=manager, project=project, query=CorpusQuery(q="score", framework="EdgeFW"))
    hit = result.traces[0].hits[0]
    assert hit.index == 4
    assert hit.before == "def snake_game():"
    assert [t for t, m in hit.line if m] == ["score"]
    assert "".join(t for t, _ in hit.line).strip() == "assert score == 0"
    assert hit.after.strip() == "unit"


def test_capped_search_says_so(corpus, project, manager, monkeypatch):
    from annotations.corpus import selectors

    monkeypatch.setattr(selectors, "HIT_CAP", 3)
    result = corpus_search(user=manager, project=project, query=CorpusQuery(q="task", mode="prefix"))
    assert result.capped and result.n_steps == 3


@pytest.mark.parametrize(
    "text,mode,why",
    [
        ("a.b", "regex", "3 plain characters"),
        ("ab|xyz", "regex", "3 plain characters"),
        ("py\\b", "regex", "or a whole word"),
        ("(unclosed", "regex", "Not a regular expression"),
        ("ok ß", "words", "fewer than 3 characters other than plain"),
        ("ok", "prefix", "Prefixes of fewer than 3"),
        ("ü ß", "phrase", "3 or more"),
        ("", "words", "Type what"),
        ("x" * 400, "words", "at most"),
    ],
)
def test_searches_the_index_cannot_serve_are_refused(text, mode, why):
    with pytest.raises(QueryError, match=why):
        query_compile(text, mode)


def test_word_only():
    """Which patterns a step can match only inside one of its words (finding.vocabulary_lookups)."""
    for pattern in ("inta\\w+", "\\mverif", "(?c)Inta[a-z]+", "foo|bar\\d{2}", "^abc$", "ab_c[0-9A-F]", "\\yx_y\\Y"):
        assert word_only(pattern), pattern
    for pattern in ("inta.x", "int[^a]x", "foo\\x41", "foo(?=o)x", "run 777", "abc\\.", "[[:alpha:]]abc",
                    "(abc)\\1", "abc\\s", "\\mverif\\W+tests", "caf[é]"):  # fmt: skip
        assert not word_only(pattern), pattern
    # the longest run of word characters every match holds (lower-cased), or None
    assert word_literal("inta.x") == "inta" and word_literal("run 7777\\d\\.1\\y") == "7777"
    assert word_literal("verif\\s+tests?") == "verif" and word_literal("(?c)INTA[^ ]+") == "inta"
    assert word_literal("(abc|abd)xy") is None and word_literal("(hello)+ world") == "hello"
    assert word_literal("foo\\x41bar") is None  # PostgreSQL reads \x41b as one character
    assert word_literal("a.b.c") is None and word_literal("(abcd)? x") is None
    # the longest word every match holds whole (a non-word character, a start or an edge around it)
    assert word_exact("\\.py\\y") == "py" and word_exact("\\s+py\\s+") == "py" and word_exact("^Run:") == "run"
    assert word_exact("[./]py$") == "py" and word_exact("foo\\.py\\y") == "py" and word_exact("\\ypy\\y") == "py"
    assert word_exact("(?c)\\.PY\\y") == "py" and word_exact("x = 12;") == "12"
    assert word_exact("(\\.py)\\y") == "py" and word_exact("(?:foo|bar)\\.(py)\\y") == "py"  # a group matched once
    for pattern in (
        "py\\y",
        "x\\.py",
        ".py ",
        "[^a]py ",
        "\\.pyé",
        "é+py ",
        "a|\\.py\\y",
        "\\x41py ",
        "\\.p\\w ",
        "(\\.py)+\\y",
    ):
        assert word_exact(pattern) is None, pattern
    # looked up by the whole word unless a longer run is there to look up (its rarity is likelier)
    from annotations.corpus.finding import _exact

    assert _exact("\\.py\\y") == "py" and _exact("(?c)\\.main\\y") == "main" and _exact("main\\.py\\y") is None
    assert word_exact("run 7777\\d\\.1\\y") == "1" and _exact("run 7777\\d\\.1\\y") is None


def test_required_literal():
    assert required_literal("verif.*tests") == 5
    assert required_literal("(abc|abcd)x") == 3  # "abc" is in every match; "x" may follow "d"
    assert required_literal("\\mdef\\M") == 3
    assert required_literal("a+bc") == 2
    assert required_literal("(abc)?d") == 1


@pytest.mark.parametrize(
    "text,mode,index,cap",
    [("approved", "words", "step_words_gin", 5000), ("unit tests", "phrase", "step_words_gin", 5000),
     ("verif", "prefix", "step_words_gin", 5000), ("inta\\w+", "regex", "step_words_gin", 5000),
     ("task", "prefix", "step_content_trgm", 1), ("def \\w+_game", "regex", "step_words_gin", 5000),
     ("x\\.y.z", "regex", "step_content_trgm", 5000), ("\\.py\\b", "regex", "step_words_gin", 1)],
)  # fmt: skip
def test_an_index_serves_the_search(corpus, project, manager, monkeypatch, text, mode, index, cap):
    """The plan of the search's index part reads the word index (words, phrases; prefixes and
    regexes with a run of 3+ word characters, with the steps holding too long a word) or the
    trigram index (other regexes; a pattern matching more words of the vocabulary than the cap),
    never every step."""
    from annotations.corpus import finding

    monkeypatch.setattr(finding, "VOCABULARY_CAP", cap)
    query = CorpusQuery(q=text, mode=mode)
    compiled = query.compiled()
    where = finding.conditions(query, compiled, project=project)
    with connection.cursor() as cur:
        cur.execute("BEGIN")
        for setting in finding.PLAN:
            cur.execute(setting)
        steps, sp, traces, tp = finding._index_conditions(cur, query, compiled, project=project, where=where)
        sql = f"EXPLAIN WITH m AS MATERIALIZED (SELECT s.trace_id FROM traces_step s WHERE {steps}) "  # noqa: S608
        sql += f"SELECT * FROM m JOIN traces_trace t ON t.id = m.trace_id WHERE {traces}"  # noqa: S608
        cur.execute(sql, [*sp, *tp])
        plan = "\n".join(r[0] for r in cur.fetchall())
        cur.execute("ROLLBACK")
    assert f"Bitmap Index Scan on {index}" in plan, plan
    other = {"step_words_gin", "step_content_trgm"} - {index}
    assert f"Bitmap Index Scan on {other.pop()}" not in plan, plan  # one index, not both intersected
    by_vocabulary = mode in ("prefix", "regex") and index == "step_words_gin"
    assert ("Bitmap Index Scan on step_long_words" in plan) == by_vocabulary
    assert "Seq Scan on traces_step" not in plan and "step_unique_index" not in plan


def test_the_vocabulary_holds_the_words_of_searchable_steps(corpus, project, manager, monkeypatch):
    """The indexer adds each new step's words (lower-cased, as ``step_words`` splits them); a
    case-sensitive regex looks them up without its case, and still finds only its own case."""
    from annotations.corpus import finding
    from traces.models import SearchWord

    words = set(SearchWord.objects.values_list("word", flat=True))
    assert {"approved", "approved_by", "unapproved", "größe", "maintain", "intake"} <= words
    assert "APPROVED" not in words and not any(len(w) > 100 for w in words)
    monkeypatch.setattr(finding, "WINDOW_BYTES", 1)
    monkeypatch.setattr(finding, "MORE_BYTES", 0)  # the index part: the vocabulary's lookup
    monkeypatch.setattr(finding, "COMMON_BYTES", 0)
    pairs, _ = found(manager, project, CorpusQuery(q="(?c)APPROVED\\M", mode="regex"))
    assert {i for t, i in pairs if t == corpus.pk} == {2}
    pairs, _ = found(manager, project, CorpusQuery(q="(?c)INTAKE", mode="regex"))
    assert {i for t, i in pairs if t == corpus.pk} == {6}
    pairs, _ = found(manager, project, CorpusQuery(q="intake_b+", mode="regex"))  # in no word of the vocabulary:
    assert {i for t, i in pairs if t == corpus.pk} == {6}  # inside the long run only (step_long_words)


def test_api_search_and_errors(corpus, client, project, annotator):
    client.force_login(annotator)
    url = reverse("api-corpus-search", args=[project.slug])
    body = client.get(url, {"q": "unit tests", "mode": "phrase"}).json()
    assert body["n_steps"] == len(brute(project, CorpusQuery(q="unit tests", mode="phrase")))
    hit = body["traces"][0]["hits"][0]
    assert hit["url"].endswith(f"#step-{hit['step']}")
    assert any(part["hit"] for part in hit["line"])
    bad = client.get(url, {"q": "a.b", "mode": "regex"})
    assert bad.status_code == 400 and "3 plain characters" in bad.json()["detail"]
    assert client.get(url, {"q": "x", "kind": "nope"}).status_code == 400
    assert client.get(url, {"q": "approved", "label": "agreed:1.1"}).status_code == 400


def test_search_content_is_escaped_on_the_page(project, client, manager):
    t = make_trace(project, raw_text="<script>alert(1)</script> approved")
    Step.objects.create(trace=t, index=0, agent="<b>Boss</b>", content="<script>alert(1)</script> approved",
                        line_start=1, line_end=1)  # fmt: skip
    steps_index_pending()
    client.force_login(manager)
    html = client.get(reverse("annotations:corpus_search", args=[project.slug]), {"q": "approved"}).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>Boss</b>" not in html


def test_outsider_gets_404(project, client, outsider):
    client.force_login(outsider)
    assert client.get(reverse("annotations:corpus_search", args=[project.slug]), {"q": "x"}).status_code == 404
    assert client.get(reverse("api-corpus-search", args=[project.slug]), {"q": "abc"}).status_code == 404


def test_query_count_does_not_grow_with_the_hits(corpus, client, project, manager):
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    client.force_login(manager)
    url = reverse("api-corpus-search", args=[project.slug])
    counts = []
    for text in ("approved", "task"):  # a few hits, then many traces
        with CaptureQueriesContext(conn) as ctx:
            body = client.get(url, {"q": text, "mode": "prefix"}).json()
        counts.append(len(ctx.captured_queries))
        assert body["n_steps"] > 0
    assert counts[0] == counts[1] <= 14, counts


def test_a_new_import_is_searchable_once_indexed_and_the_search_says_so(corpus, client, project, manager):
    other = make_trace(project, raw_text="x")
    Step.objects.create(trace=other, index=0, content="a brand new zebrafish approved", line_start=1, line_end=1)
    Step.objects.create(trace=other, index=1, content="and a second step", line_start=2, line_end=2)
    query = CorpusQuery(q="zebrafish")
    result = corpus_search(user=manager, project=project, query=query)
    assert result.n_steps == 0 and result.waiting == 1 == search_backlog(project=project)
    client.force_login(manager)
    page = client.get(reverse("annotations:corpus_search", args=[project.slug]), {"q": "zebrafish"}).content.decode()
    assert 'data-testid="search-waiting"' in page and "not searchable yet" in page
    assert steps_index_pending(batch=1) == 2  # batches smaller than the work: it goes on until none wait
    result = corpus_search(user=manager, project=project, query=query)
    assert result.n_steps == 1 and result.waiting == 0


def test_a_step_whose_text_changes_waits_for_the_indexer_and_is_found_after(corpus, project, manager):
    """An edit of a searchable step's text (admin, a script) makes it wait for the indexer again
    (traces migration 0021), which adds its new words to the vocabulary: a regex of word characters
    then finds it; meanwhile the search says a trace waits."""
    step = Step.objects.filter(trace=corpus, index=0).get()
    Step.objects.filter(pk=step.pk).update(content=step.content + " wombatize")
    assert not Step.objects.get(pk=step.pk).searchable
    query = CorpusQuery(q="wombat\\w+", mode="regex")
    assert corpus_search(user=manager, project=project, query=query).waiting == 1
    assert steps_index_pending() == 1
    pairs, _ = found(manager, project, query)
    assert pairs == {(corpus.pk, 0)}
    Step.objects.filter(pk=step.pk).update(agent="Someone else")  # not its text: stays searchable
    assert Step.objects.get(pk=step.pk).searchable
