"""The trace list: filters, search, sort, pagination, pinned query counts (page and API)."""

import pytest
from django.urls import reverse

from tests.traces.viewer_factories import bare_trace, submitted_annotation
from traces.viewer.selectors import TraceFilters, trace_filter_choices, trace_list_for_user, trace_rows_mark_labelled

pytestmark = pytest.mark.django_db


def ids(qs):
    return [t.pk for t in qs]


def listed(viewer, project, **query):
    return trace_list_for_user(user=viewer, project=project, filters=TraceFilters.from_query(query))


@pytest.fixture
def mixed(project):
    return {
        "chatdev": bare_trace(
            project,
            mas_name="ChatDev",
            llm_name="gpt-4o",
            benchmark="ProgramDev",
            outcome="failure",
            size_bytes=500,
            n_steps=30,
            n_agents=5,
        ),
        "metagpt": bare_trace(
            project,
            mas_name="MetaGPT",
            llm_name="claude-3.7",
            benchmark="ProgramDev",
            outcome="success",
            size_bytes=9000,
            n_steps=5,
            n_agents=2,
            title="Snake game",
        ),
        "ag2": bare_trace(
            project,
            mas_name="AG2",
            llm_name="gpt-4o",
            benchmark="GSM-Plus",
            outcome="",
            size_bytes=200,
            n_steps=80,
            n_agents=3,
            task="Solve: how many apples does Mia have?",
        ),
    }


def test_list_filters_by_framework(viewer, project, mixed):
    assert ids(listed(viewer, project, framework="MetaGPT")) == [mixed["metagpt"].pk]


def test_list_filters_by_llm(viewer, project, mixed):
    assert set(ids(listed(viewer, project, llm="gpt-4o"))) == {mixed["chatdev"].pk, mixed["ag2"].pk}


def test_list_filters_by_benchmark(viewer, project, mixed):
    assert ids(listed(viewer, project, benchmark="GSM-Plus")) == [mixed["ag2"].pk]


@pytest.mark.parametrize(("outcome", "key"), [("success", "metagpt"), ("failure", "chatdev"), ("unknown", "ag2")])
def test_list_filters_by_outcome(viewer, project, mixed, outcome, key):
    assert ids(listed(viewer, project, outcome=outcome)) == [mixed[key].pk]


def test_labelled_means_at_least_one_submitted_annotation(manager, project, mixed):
    # a manager: she may see every rater's labels, so every submission counts for her (issue 27:
    # for a viewer or annotator only submissions the blind rule shows her do)
    submitted_annotation(mixed["chatdev"])
    submitted_annotation(mixed["ag2"], state="draft")
    assert ids(listed(manager, project, labelled="yes")) == [mixed["chatdev"].pk]
    assert set(ids(listed(manager, project, labelled="no"))) == {mixed["metagpt"].pk, mixed["ag2"].pk}


def test_labels_from_an_imported_source_do_not_make_a_trace_labelled(viewer, project, mixed):
    submitted_annotation(mixed["chatdev"], rater_name="MAST-Data judge", kind="imported")
    assert ids(listed(viewer, project, labelled="yes")) == []


def test_rows_say_whether_they_are_labelled(manager, project, mixed):
    submitted_annotation(mixed["metagpt"])
    rows = trace_rows_mark_labelled(user=manager, project=project, rows=listed(manager, project))
    flags = {t.pk: t.is_labelled for t in rows}
    assert flags == {mixed["chatdev"].pk: False, mixed["metagpt"].pk: True, mixed["ag2"].pk: False}


def test_search_matches_title_case_insensitively(viewer, project, mixed):
    assert ids(listed(viewer, project, q="snake")) == [mixed["metagpt"].pk]


def test_search_matches_task(viewer, project, mixed):
    assert ids(listed(viewer, project, q="APPLES")) == [mixed["ag2"].pk]


def test_search_matches_external_id(viewer, project, mixed):
    ext = mixed["chatdev"].external_id
    assert ids(listed(viewer, project, q=ext)) == [mixed["chatdev"].pk]


def test_search_never_reads_raw_text(viewer, project):
    bare_trace(project, raw_text="needle-in-raw-text only here\n")
    assert ids(listed(viewer, project, q="needle-in-raw")) == []


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("newest", ["ag2", "metagpt", "chatdev"]),
        ("oldest", ["chatdev", "metagpt", "ag2"]),
        ("size", ["metagpt", "chatdev", "ag2"]),
        ("steps", ["ag2", "chatdev", "metagpt"]),
        ("agents", ["chatdev", "ag2", "metagpt"]),
        ("framework", ["ag2", "chatdev", "metagpt"]),
    ],
)
def test_list_sorts(viewer, project, mixed, sort, order):
    assert ids(listed(viewer, project, sort=sort)) == [mixed[k].pk for k in order]


def test_unknown_sort_and_outcome_fall_back_to_no_filter(viewer, project, mixed):
    f = TraceFilters.from_query({"sort": "raw_text", "outcome": "maybe"})
    assert (f.sort, f.outcome) == ("newest", "")
    assert len(listed(viewer, project, sort="raw_text", outcome="maybe")) == 3


def test_list_rows_do_not_load_raw_text(viewer, project, mixed):
    row = listed(viewer, project)[0]
    assert "raw_text" in row.get_deferred_fields()
    assert "task" in row.get_deferred_fields()


def test_filter_choices_are_distinct_values(project, mixed, django_assert_num_queries):
    with django_assert_num_queries(1):
        choices = trace_filter_choices(project=project)
    assert choices == {
        "framework": ["AG2", "ChatDev", "MetaGPT"],
        "llm": ["claude-3.7", "gpt-4o"],
        "benchmark": ["GSM-Plus", "ProgramDev"],
    }


def test_outsider_cannot_list(outsider, project, mixed):
    from django.http import Http404

    with pytest.raises(Http404):
        list(listed(outsider, project))


# ---------------------------------------------------------------- the page


def test_list_page_shows_rows_and_filters(client, viewer, project, mixed):
    client.force_login(viewer)
    r = client.get(reverse("trace_list", args=["demo"]))
    html = r.content.decode()
    assert r.status_code == 200
    assert "Snake game" in html
    assert '<option value="MetaGPT"' in html
    assert "succeeded" in html and "failed" in html


def test_list_page_paginates_by_50(client, viewer, project):
    for _ in range(53):
        bare_trace(project)
    client.force_login(viewer)
    first = client.get(reverse("trace_list", args=["demo"]))
    second = client.get(reverse("trace_list", args=["demo"]) + "?page=2")
    assert len(first.context["traces"]) == 50
    assert len(second.context["traces"]) == 3
    assert "Page 1 of 2" in first.content.decode()


def test_list_page_column_headers_sort_within_the_filters(client, viewer, project, mixed):
    client.force_login(viewer)
    html = client.get(reverse("trace_list", args=["demo"]) + "?framework=AG2").content.decode()
    assert 'href="?framework=AG2&amp;sort=steps"' in html
    assert 'href="?framework=AG2&amp;sort=size"' in html


def test_list_page_keeps_filters_in_pagination_links(client, viewer, project):
    for _ in range(51):
        bare_trace(project, mas_name="AG2")
    client.force_login(viewer)
    html = client.get(reverse("trace_list", args=["demo"]) + "?framework=AG2&sort=size").content.decode()
    assert "?framework=AG2&amp;sort=size&amp;page=2" in html


@pytest.mark.parametrize("n", [3, 60])
def test_list_page_query_count_is_pinned(client, viewer, project, n, django_assert_num_queries):
    for _ in range(n):
        bare_trace(project)
    client.force_login(viewer)
    url = reverse("trace_list", args=["demo"]) + "?labelled=no&q=Trace&sort=steps"
    # session, user, project, role, count, page rows, filter choices
    with django_assert_num_queries(7):
        assert client.get(url).status_code == 200


def test_outsider_gets_404_on_list_page(client, outsider, project, mixed):
    client.force_login(outsider)
    assert client.get(reverse("trace_list", args=["demo"])).status_code == 404


def test_list_page_escapes_titles(client, viewer, project):
    bare_trace(project, title="<script>window.__xss=1</script>")
    client.force_login(viewer)
    html = client.get(reverse("trace_list", args=["demo"])).content.decode()
    assert "<script>window.__xss" not in html
    assert "&lt;script&gt;" in html


# ---------------------------------------------------------------- the API


def test_list_api_filters_and_never_sends_raw_text(client, viewer, project, mixed):
    client.force_login(viewer)
    r = client.get("/api/projects/demo/traces/?framework=AG2")
    body = r.json()
    assert r.status_code == 200
    assert body["count"] == 1
    row = body["results"][0]
    assert row["id"] == mixed["ag2"].pk
    assert row["framework"] == "AG2"
    assert "raw_text" not in row


def test_list_api_paginates(client, viewer, project):
    for _ in range(55):
        bare_trace(project)
    client.force_login(viewer)
    body = client.get("/api/projects/demo/traces/?page=2").json()
    assert body["count"] == 55
    assert len(body["results"]) == 5
    assert body["previous"] is not None


def test_list_api_rejects_a_bad_sort(client, viewer, project, mixed):
    client.force_login(viewer)
    r = client.get("/api/projects/demo/traces/?sort=raw_text")
    assert r.status_code == 400
    assert "sort" in r.json()


@pytest.mark.parametrize("n", [3, 60])
def test_list_api_query_count_is_pinned(client, viewer, project, n, django_assert_num_queries):
    for _ in range(n):
        bare_trace(project)
    client.force_login(viewer)
    # session, user, project, role, count, page rows
    with django_assert_num_queries(6):
        assert client.get("/api/projects/demo/traces/?labelled=no&sort=size").status_code == 200


def test_outsider_gets_404_on_list_api(client, outsider, project, mixed):
    client.force_login(outsider)
    assert client.get("/api/projects/demo/traces/").status_code == 404


def test_search_count_stops_at_the_cap(client, viewer, project, monkeypatch):
    from traces.viewer.selectors import CappedCountPaginator

    monkeypatch.setattr(CappedCountPaginator, "count_cap", 5)
    for _ in range(8):
        bare_trace(project, title="flaky migration")
    client.force_login(viewer)
    page = client.get(reverse("trace_list", args=["demo"]) + "?q=migration")
    assert page.context["page_obj"].paginator.count == 5
    assert "5+ traces match" in page.content.decode()
    body = client.get("/api/projects/demo/traces/?q=migration").json()
    assert (body["count"], body["count_capped"]) == (5, True)
    assert client.get("/api/projects/demo/traces/").json()["count_capped"] is False


@pytest.mark.parametrize("n", [3, 60])
def test_unfiltered_list_asks_the_label_state_once_for_the_page(client, manager, project, n, django_assert_num_queries):
    for _ in range(n):
        submitted_annotation(bare_trace(project))
    client.force_login(manager)
    # session, user, project, role, count, page rows, filter choices, which of the page's rows are labelled
    with django_assert_num_queries(8):
        html = client.get(reverse("trace_list", args=["demo"])).content.decode()
    assert html.count(">labelled</span>") == min(n, 50)
    # the API: the same without the filter choices
    with django_assert_num_queries(7):
        rows = client.get("/api/projects/demo/traces/").json()["results"]
    assert all(r["is_labelled"] for r in rows)


def test_another_humans_submission_outside_rounds_does_not_make_a_trace_labelled_for_a_viewer(
    viewer, manager, project, mixed
):
    """Issue 27: "labelled" follows the blind rule; a viewer does not see another human's labels
    outside rounds, so she is not told that the trace was labelled either."""
    submitted_annotation(mixed["chatdev"])
    assert ids(listed(viewer, project, labelled="yes")) == []
    assert ids(listed(manager, project, labelled="yes")) == [mixed["chatdev"].pk]
