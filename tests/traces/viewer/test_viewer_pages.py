"""The trace page, the raw view and the viewer's first window (HTML), on PostgreSQL."""

import pytest
from django.urls import reverse

from tests.traces.viewer_factories import chatdev_log, trace_from_text

pytestmark = pytest.mark.django_db

XSS = '<script>window.__xss=1</script> and <img src=x onerror="window.__xss=2">'


@pytest.fixture
def small_trace(project):
    return trace_from_text(project, chatdev_log(lines=120, marker=XSS), filename="photos.log", outcome="failure")


@pytest.fixture
def huge_trace(project):
    return trace_from_text(project, chatdev_log(lines=20000, long_step_every=9), filename="huge.log")


def test_trace_page_shows_metadata_and_steps(client, viewer, small_trace):
    client.force_login(viewer)
    r = client.get(reverse("trace_detail", args=["demo", small_trace.pk]))
    assert r.status_code == 200
    html = r.content.decode()
    assert 'class="trace-viewer"' in html
    assert "ChatDev" in html
    assert 'id="step-1"' in html
    assert "Chief Executive Officer" in html
    assert "task failed" in html


def test_trace_page_escapes_trace_content(client, viewer, small_trace):
    client.force_login(viewer)
    html = client.get(reverse("trace_detail", args=["demo", small_trace.pk])).content.decode()
    assert "<script>window.__xss" not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<img src=x" not in html


def test_huge_trace_renders_only_the_first_window(client, viewer, huge_trace):
    client.force_login(viewer)
    html = client.get(reverse("trace_detail", args=["demo", huge_trace.pk])).content.decode()
    n_cards = html.count('<article class="tv-step')
    n_lines = html.count('class="tv-line"')
    assert huge_trace.n_steps > 1000
    assert 1 <= n_cards <= 30
    assert n_lines <= 300  # the first screens; the viewer fetches the rest as the reader scrolls
    assert f'data-total-steps="{huge_trace.n_steps}"' in html
    assert 'id="tv-outline-data"' not in html  # the outline is fetched after first paint


def test_long_steps_render_collapsed_with_show_all(client, viewer, huge_trace):
    client.force_login(viewer)
    html = client.get(reverse("trace_detail", args=["demo", huge_trace.pk])).content.decode()
    assert "is-collapsed" in html
    assert "Show all " in html


def test_trace_page_query_count_does_not_grow_with_steps(client, viewer, huge_trace, django_assert_num_queries):
    client.force_login(viewer)
    # session, user, project, role, trace, first window of steps (agent hues come from Trace.agents)
    with django_assert_num_queries(6):
        client.get(reverse("trace_detail", args=["demo", huge_trace.pk]))


def test_raw_view_shows_a_window_of_lines(client, viewer, huge_trace):
    client.force_login(viewer)
    r = client.get(reverse("trace_raw", args=["demo", huge_trace.pk]) + "?start=1001")
    html = r.content.decode()
    assert r.status_code == 200
    assert 'id="L1001"' in html
    assert 'id="L2000"' in html
    assert 'id="L2001"' not in html
    assert 'id="L1000"' not in html


def test_raw_view_go_to_line_redirects_to_its_page(client, viewer, huge_trace):
    client.force_login(viewer)
    r = client.get(reverse("trace_raw", args=["demo", huge_trace.pk]) + "?line=12345")
    assert r.status_code == 302
    assert r["Location"].endswith("?start=12001#L12345")


def test_raw_view_escapes_content(client, viewer, small_trace):
    client.force_login(viewer)
    html = client.get(reverse("trace_raw", args=["demo", small_trace.pk])).content.decode()
    assert "<script>window.__xss" not in html
    assert "&lt;img src=x" in html


@pytest.mark.parametrize("name", ["trace_detail", "trace_raw"])
def test_outsider_gets_404_on_trace_pages(client, outsider, small_trace, name):
    client.force_login(outsider)
    assert client.get(reverse(name, args=["demo", small_trace.pk])).status_code == 404


def test_trace_of_another_project_is_404(client, viewer, small_trace):
    from tests.factories import ProjectFactory

    other = ProjectFactory(slug="other")
    foreign = trace_from_text(other, chatdev_log(lines=40), filename="foreign.log")
    client.force_login(viewer)
    assert client.get(reverse("trace_detail", args=["demo", foreign.pk])).status_code == 404


def test_viewer_context_is_the_embedding_contract(huge_trace):
    from traces.viewer.selectors import trace_get, trace_viewer_context

    ctx = trace_viewer_context(trace=trace_get(project=huge_trace.project, pk=huge_trace.pk))
    assert set(ctx) == {"trace", "first_steps", "outline", "outline_version"}
    assert [s.index for s in ctx["first_steps"]] == list(range(len(ctx["first_steps"])))
    assert ctx["outline"] is None  # fetched by the viewer from data-outline-url


def test_outline_maps_a_line_to_its_step(huge_trace):
    from traces.viewer.selectors import trace_outline

    outline = trace_outline(trace=huge_trace)
    assert outline.step_for_line(1) == 0
    assert outline.step_for_line(outline.line_start[500]) == 500
    assert outline.step_for_line(outline.line_end[500]) == 500
    gap = outline.line_end[500] + 1  # a blank line between steps belongs to the next one
    assert outline.step_for_line(gap) == 501
    assert outline.step_for_line(10**9) is None


def test_viewer_include_renders_in_another_page(huge_trace):
    from django.template.loader import render_to_string

    from traces.viewer.selectors import trace_get, trace_viewer_context

    ctx = trace_viewer_context(trace=trace_get(project=huge_trace.project, pk=huge_trace.pk))
    html = render_to_string("traces/viewer/_viewer.html", {**ctx, "steps": ctx["first_steps"]})
    for attr in ("data-trace-id", "data-steps-url", "data-search-url", "data-total-steps", "data-outline-url"):
        assert attr in html
    assert f'outline/?v={ctx["outline_version"]}"' in html


def test_trace_page_lists_source_metadata_escaped(client, viewer, project):
    trace = trace_from_text(
        project, chatdev_log(lines=40), filename="m.log", metadata={"trace_key": "<b>k-17</b>", "index": 3}
    )
    client.force_login(viewer)
    html = client.get(reverse("trace_detail", args=["demo", trace.pk])).content.decode()
    assert "trace_key" in html
    assert "&lt;b&gt;k-17&lt;/b&gt;" in html


def test_annotators_get_a_label_link_viewers_do_not(client, annotator, viewer, small_trace):
    url = reverse("trace_detail", args=["demo", small_trace.pk])
    label = reverse("annotations:workspace", args=["demo", small_trace.pk])
    client.force_login(annotator)
    assert label in client.get(url).content.decode()
    client.force_login(viewer)
    assert label not in client.get(url).content.decode()
