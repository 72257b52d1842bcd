"""The step tree of span-based traces in the viewer's pages and API; flat traces unchanged."""

import pytest
from django.urls import reverse

from tests.traces.viewer_factories import chatdev_log, trace_from_text
from traces.importing.service import traces_import
from traces.models import Trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def span_trace(project, import_fixtures) -> Trace:
    result = traces_import(project=project, paths_or_files=[import_fixtures / "otlp_genai.jsonl"])
    return Trace.objects.get(pk=result.trace_ids[0])


@pytest.fixture
def flat_trace(project) -> Trace:
    return trace_from_text(project, chatdev_log(lines=400), filename="flat.log")


def api(trace, tail=""):
    return f"/api/projects/demo/traces/{trace.pk}/{tail}"


def test_steps_api_gives_parent_model_tokens_and_timing(client, viewer, span_trace):
    client.force_login(viewer)
    steps = client.get(api(span_trace, "steps/?limit=200")).json()["steps"]
    call = next(s for s in steps if s["agent"] == "Researcher" and s["kind"] == "tool_call")
    parent = steps[call["parent_index"]]
    assert (parent["agent"], parent["kind"]) == ("Researcher", "system")
    assert (call["model"], call["input_tokens"], call["output_tokens"], call["duration_ms"]) == (
        "gpt-4o-mini",
        230,
        31,
        1300,
    )
    assert call["started_at"].startswith("2025-12-01T12:00:02.2")
    assert steps[0]["parent_index"] is None


def test_outline_api_has_the_tree_for_span_traces_only(client, viewer, span_trace, flat_trace):
    client.force_login(viewer)
    tree = client.get(api(span_trace, "outline/")).json()["tree"]
    n = span_trace.n_steps
    assert len(tree["p"]) == len(tree["m"]) == len(tree["tin"]) == len(tree["ms"]) == n
    assert tree["p"][0] == -1 and all(-1 <= p < i for i, p in enumerate(tree["p"]))
    assert tree["models"][tree["m"][n - 1]] == "gpt-4o" and tree["tout"][n - 1] == 33
    assert "tree" not in client.get(api(flat_trace, "outline/")).json()


def test_span_and_flat_trace_pages_cost_the_same_queries(
    client, viewer, span_trace, flat_trace, django_assert_num_queries
):
    client.force_login(viewer)
    # session, user, project, role, trace, first window of steps; the outline (with the tree of a
    # span trace) is not in the HTML: the viewer fetches it from the outline API after first paint
    with django_assert_num_queries(6):
        client.get(reverse("trace_detail", args=["demo", flat_trace.pk]))
    with django_assert_num_queries(6):
        html = client.get(reverse("trace_detail", args=["demo", span_trace.pk])).content.decode()
    assert '"tree"' not in html
    assert "js/trace-page.js" in html and "css/trace-tree.css" in html


def test_outline_api_query_count_is_pinned(client, viewer, span_trace, flat_trace, django_assert_num_queries):
    client.force_login(viewer)
    # session, user, project, role, trace, outline rows (+ the tree for span traces)
    with django_assert_num_queries(6):
        client.get(api(flat_trace, "outline/"))
    with django_assert_num_queries(7):
        client.get(api(span_trace, "outline/"))
