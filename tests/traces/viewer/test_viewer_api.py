"""The viewer API: trace detail, steps windows, outline, raw text, search inside a trace."""

import pytest

from tests.traces.viewer_factories import chatdev_log, trace_from_text
from traces.viewer.search import trace_search
from traces.viewer.selectors import trace_steps_window

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"


@pytest.fixture
def trace(project):
    return trace_from_text(project, chatdev_log(lines=600, long_step_every=9, marker=XSS), filename="t.log")


def api(trace, tail=""):
    return f"/api/projects/demo/traces/{trace.pk}/{tail}"


def test_detail_has_metadata_and_stats_not_raw_text(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace)).json()
    assert body["framework"] == "ChatDev"
    assert body["stats"]["steps"] == trace.n_steps
    assert body["stats"]["lines"] == trace.n_lines
    assert "raw_text" not in body


def test_steps_window_returns_the_asked_range(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, "steps/?start=10&limit=5")).json()
    assert [s["index"] for s in body["steps"]] == [10, 11, 12, 13, 14]
    assert body["next_start"] == 15
    assert body["total"] == trace.n_steps
    step = body["steps"][0]
    assert step["line_end"] >= step["line_start"]
    assert step["content"].count("\n") == step["line_end"] - step["line_start"]


def test_steps_window_at_the_end_has_no_next(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, f"steps/?start={trace.n_steps - 2}&limit=50")).json()
    assert [s["index"] for s in body["steps"]] == [trace.n_steps - 2, trace.n_steps - 1]
    assert body["next_start"] is None


def test_steps_window_past_the_end_is_empty(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, f"steps/?start={trace.n_steps + 5}")).json()
    assert body["steps"] == []
    assert body["next_start"] is None


@pytest.mark.parametrize("query", ["start=-1", "limit=0", "limit=201", "start=abc"])
def test_steps_window_rejects_bad_bounds(client, viewer, trace, query):
    client.force_login(viewer)
    r = client.get(api(trace, f"steps/?{query}"))
    assert r.status_code == 400


def test_steps_window_max_lines_keeps_at_least_one_step(trace):
    steps = trace_steps_window(trace=trace, start=0, limit=200, max_lines=1)
    assert len(steps) == 1
    steps = trace_steps_window(trace=trace, start=0, limit=200, max_lines=100)
    assert sum(s.line_end - s.line_start + 1 for s in steps) <= 100


def test_steps_of_one_agent_share_a_colour(client, viewer, trace):
    client.force_login(viewer)
    steps = client.get(api(trace, "steps/?start=0&limit=40")).json()["steps"]
    hues = {}
    for s in steps:
        hues.setdefault(s["agent"], set()).add(s["hue"])
    assert all(len(h) == 1 for h in hues.values())
    assert hues[""] == {-1}
    named = [next(iter(h)) for a, h in hues.items() if a]
    assert len(set(named)) == len(named)


def test_outline_lists_every_step(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, "outline/")).json()
    assert len(body["a"]) == len(body["ls"]) == len(body["le"]) == trace.n_steps
    assert len(body["hues"]) == len(body["agents"])
    assert body["ls"] == sorted(body["ls"])


def test_outline_of_the_current_version_may_be_kept_by_the_browser(client, viewer, trace):
    from traces.viewer.selectors import trace_outline_version

    client.force_login(viewer)
    current = client.get(api(trace, f"outline/?v={trace_outline_version(trace=trace)}"))
    assert current["Cache-Control"] == "private, max-age=86400, immutable"
    for stale in ("outline/", "outline/?v=0-0"):
        assert "max-age" not in client.get(api(trace, stale)).get("Cache-Control", "")


def test_outline_hues_match_the_step_windows(client, viewer, trace):
    client.force_login(viewer)
    outline = client.get(api(trace, "outline/")).json()
    steps = client.get(api(trace, "steps/?limit=200")).json()["steps"]
    hue_of = dict(zip(outline["agents"], outline["hues"], strict=True))
    assert all(s["hue"] == hue_of[s["agent"]] for s in steps)


def test_raw_is_plain_text_exactly_as_imported(client, viewer, trace):
    client.force_login(viewer)
    r = client.get(api(trace, "raw/"))
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/plain")
    assert r["X-Content-Type-Options"] == "nosniff"
    assert r.content.decode() == trace.raw_text


def test_search_finds_every_occurrence_with_step_and_line(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, "search/?q=turn 7:")).json()
    lines = trace.raw_text.split("\n")
    expected = [n for n, text in enumerate(lines, start=1) if "turn 7:" in text]
    assert [h["line"] for h in body["hits"]] == expected
    assert body["count"] == len(expected)
    for hit in body["hits"]:
        assert "turn 7:" in hit["snippet"]
        assert lines[hit["line"] - 1][hit["col"] : hit["col"] + 7] == "turn 7:"
    assert {h["step"] for h in body["hits"]} == {8}


def test_search_around_a_step_carries_the_window_of_the_first_hit_after_it(client, viewer, trace):
    client.force_login(viewer)
    hits = client.get(api(trace, "search/?q=turn 3")).json()["hits"]
    assert "window" not in client.get(api(trace, "search/?q=turn 3")).json()
    later = next(h for h in hits if h["step"] > hits[0]["step"])
    body = client.get(api(trace, f"search/?q=turn 3&around={later['step']}")).json()
    assert body["hits"] == hits
    assert hits[body["window"]["hit"]] == later
    # the same steps a far jump to that step fetches (from 3 before it, at most 24 / 400 lines)
    start = max(0, later["step"] - 3)
    jump = client.get(api(trace, f"steps/?start={start}&limit=24&max_lines=400")).json()["steps"]
    assert body["window"]["steps"] == jump
    assert later["step"] in [s["index"] for s in body["window"]["steps"]]


def test_search_around_past_the_last_hit_wraps_to_the_first(client, viewer, trace):
    client.force_login(viewer)
    body = client.get(api(trace, f"search/?q=turn 3&around={trace.n_steps + 10}")).json()
    first = body["hits"][0]["step"]
    assert body["window"]["hit"] == 0
    assert first in [s["index"] for s in body["window"]["steps"]]
    nothing = client.get(api(trace, "search/?q=no such words anywhere&around=0")).json()
    assert nothing["count"] == 0
    assert "window" not in nothing


def test_search_around_costs_one_query_more(client, viewer, trace, django_assert_num_queries):
    client.force_login(viewer)
    client.get(api(trace, "search/?q=turn 3"))
    with django_assert_num_queries(6, info="search") as plain:
        client.get(api(trace, "search/?q=turn 3"))
    with django_assert_num_queries(7, info="search around") as around:
        client.get(api(trace, "search/?q=turn 3&around=0"))
    assert "LIMIT 24" in around.captured_queries[-1]["sql"]  # the window's steps: one query more
    assert len(plain.captured_queries) + 1 == len(around.captured_queries)


def test_search_is_case_insensitive(trace):
    assert trace_search(trace=trace, q="RENAME_PHOTOS.PY --DRY-RUN; <SCRIPT>").count == trace.raw_text.count(
        "rename_photos.py --dry-run; <script>"
    )


def test_search_finds_several_hits_on_one_line(project):
    t = trace_from_text(project, "alpha beta alpha\n\ngamma alpha\n", format="plaintext", filename="p.txt")
    hits = trace_search(trace=t, q="alpha").hits
    assert [(h.line, h.col) for h in hits] == [(1, 0), (1, 11), (3, 6)]


@pytest.mark.parametrize(
    ("q", "lines"),
    [
        ("100%", [1]),  # LIKE wildcards in the query are plain characters
        ("E_N", [2]),
        ("c:\\TEMP", [3]),
        ("ÄRGER", [4]),  # not ASCII: the locale's case folding
        ("0% ", [1]),
    ],
)
def test_search_treats_wildcards_as_text_and_folds_case(project, q, lines):
    text = "done: 100% of it\n\ndone_now and then\n\nsaved to C:\\temp\\x\n\nkein ärger hier\n"
    t = trace_from_text(project, text, format="plaintext", filename="w.txt")
    assert [h.line for h in trace_search(trace=t, q=q).hits] == [2 * k - 1 for k in lines]


def test_search_caps_hits(trace):
    result = trace_search(trace=trace, q="turn", max_hits=10)
    assert result.count == 10
    assert result.truncated


def test_search_with_one_character_finds_nothing(client, viewer, trace):
    client.force_login(viewer)
    assert client.get(api(trace, "search/?q=t")).json()["count"] == 0


def test_search_needs_q(client, viewer, trace):
    client.force_login(viewer)
    assert client.get(api(trace, "search/")).status_code == 400


def test_search_snippet_of_a_long_line_is_cut_around_the_hit(project):
    line = "x" * 500 + " needle " + "y" * 500
    t = trace_from_text(project, line + "\n", format="plaintext", filename="long.txt")
    hit = trace_search(trace=t, q="needle").hits[0]
    assert "needle" in hit.snippet
    assert len(hit.snippet) <= 122


@pytest.mark.parametrize("role", ["viewer", "annotator", "manager"])
def test_every_role_can_read_a_trace(client, request, trace, role):
    client.force_login(request.getfixturevalue(role))
    assert client.get(api(trace, "steps/")).status_code == 200


@pytest.mark.parametrize("tail", ["", "steps/", "outline/", "raw/", "search/?q=turn"])
def test_outsider_gets_404_on_every_viewer_endpoint(client, outsider, trace, tail):
    client.force_login(outsider)
    assert client.get(api(trace, tail)).status_code == 404


@pytest.mark.parametrize("tail", ["", "steps/", "outline/", "raw/", "search/?q=turn"])
def test_trace_of_another_project_is_404_on_every_endpoint(client, viewer, project, tail):
    from tests.factories import ProjectFactory

    foreign = trace_from_text(ProjectFactory(slug="other"), chatdev_log(lines=40), filename="f.log")
    client.force_login(viewer)
    assert client.get(api(foreign, tail)).status_code == 404


def test_anonymous_gets_no_trace_data(client, trace):
    assert client.get(api(trace, "steps/")).status_code in (401, 403)


def test_steps_api_query_count_is_pinned(client, viewer, trace, django_assert_num_queries):
    client.force_login(viewer)
    # session, user, project, role, trace, steps (agent colours come from Trace.agents)
    with django_assert_num_queries(6):
        client.get(api(trace, "steps/?start=0&limit=200"))
