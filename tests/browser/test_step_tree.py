"""The step tree of span-based traces in Chromium: panel, parent links, folding, outline by agent, XSS."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest_paths import FIXTURES
from tests.traces.viewer_factories import chatdev_log, trace_from_text
from traces.importing.service import traces_import
from traces.models import Trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'


@pytest.fixture
def span_trace(project):
    result = traces_import(project=project, paths_or_files=[FIXTURES / "import" / "otlp_genai.jsonl"])
    return Trace.objects.get(pk=result.trace_ids[0])


@pytest.fixture
def tpage(page):
    page.set_default_timeout(45000)  # 2 shared cores: page loads can take long under others' load
    return page


def open_trace(page, live_server, trace):
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/p/demo/traces/{trace.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    return errors


def visible_steps(page):
    return page.evaluate(
        "() => [...document.querySelectorAll('.tv-step')].filter((c) => c.offsetParent).map((c) => +c.dataset.step)"
    )


def test_span_trace_shows_tree_parents_and_costs(tpage, live_server, login, viewer, span_trace, screenshot):
    login(tpage, viewer)
    errors = open_trace(tpage, live_server, span_trace)
    tpage.wait_for_selector(".trace-viewer[data-tree='1'] .tt-panel")
    assert errors == []
    tree = tpage.locator(".tt-tree")
    assert tree.locator(":scope > .tt-node > .tt-row .tt-agent").all_inner_texts() == ["Orchestrator"]
    # under it: the Researcher's invocation and its two tool calls, the Analyst's and its call
    assert tree.locator(".tt-sub .tt-agent").all_inner_texts() == ["Researcher"] * 3 + ["Analyst"] * 2
    call = tpage.locator("#step-7")
    assert call.locator(".tt-parent").inner_text() == "↳ #4"
    assert call.locator(".tt-meta").inner_text() == "gpt-4o-mini · 230 → 31 tok · 1.3 s"
    depth = tpage.evaluate("() => getComputedStyle(document.querySelector('#step-8')).getPropertyValue('--tt-depth')")
    assert depth.strip() == "3"  # Orchestrator > Researcher > call > output
    screenshot(tpage, "viewer-step-tree", full_page=False)


def test_folding_an_invocation_hides_its_steps_until_unfolded(
    tpage, live_server, login, viewer, span_trace, screenshot
):
    login(tpage, viewer)
    open_trace(tpage, live_server, span_trace)
    tpage.wait_for_selector(".tt-panel")
    assert 5 in visible_steps(tpage)
    tpage.locator("#step-4 .tt-fold").click()
    assert tpage.locator("#step-4 .tt-fold").inner_text() == "▸ 7 hidden"
    shown = visible_steps(tpage)
    assert 4 in shown and not set(range(5, 12)) & set(shown) and 12 in shown
    screenshot(tpage, "viewer-step-tree-folded", full_page=False)
    tpage.locator('.tt-toggle[data-fold="4"]').click()  # the panel's toggle unfolds it again
    assert set(range(4, 12)) <= set(visible_steps(tpage))


def test_outline_by_agent_lists_invocations_and_jumps(tpage, live_server, login, viewer, span_trace, screenshot):
    login(tpage, viewer)
    open_trace(tpage, live_server, span_trace)
    tpage.locator(".tt-tab", has_text="By agent").click()
    boxes = tpage.locator(".tt-agent-box .tt-agent-head .tt-agent").all_inner_texts()
    assert boxes == ["Orchestrator", "user", "Researcher", "Analyst"]
    analyst = tpage.locator(".tt-agent-box", has_text="Analyst")
    assert "tokens in" in analyst.inner_text()
    analyst.locator(".tt-inv .tt-go").click()
    tpage.wait_for_function("() => document.querySelector('.tv-step.is-current')?.dataset.step === '12'")
    screenshot(tpage, "viewer-step-tree-by-agent", full_page=False)


def test_flat_traces_get_no_tree_panel(tpage, live_server, login, viewer, project):
    trace = trace_from_text(project, chatdev_log(lines=300), filename="flat.log")
    login(tpage, viewer)
    assert open_trace(tpage, live_server, trace) == []
    tpage.wait_for_timeout(300)
    assert tpage.locator(".tt-panel").count() == 0 and tpage.locator(".tt-extra").count() == 0


def test_agent_names_and_models_from_spans_are_escaped(tpage, live_server, login, viewer, project):
    spans = [
        {
            "traceId": "x1",
            "spanId": "a",
            "name": "agent",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                {"key": "gen_ai.agent.name", "value": {"stringValue": XSS}},
            ],
        },
        {
            "traceId": "x1",
            "spanId": "b",
            "parentSpanId": "a",
            "name": "chat",
            "attributes": [
                {"key": "gen_ai.request.model", "value": {"stringValue": XSS}},
                {
                    "key": "gen_ai.output.messages",
                    "value": {
                        "stringValue": json.dumps(
                            [{"role": "assistant", "parts": [{"type": "text", "content": "hello " + XSS}]}]
                        )
                    },
                },
            ],
        },
    ]
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    result = traces_import(project=project, paths_or_files=[SimpleUploadedFile("x.json", doc.encode())])
    trace = Trace.objects.get(pk=result.trace_ids[0])
    login(tpage, viewer)
    open_trace(tpage, live_server, trace)
    tpage.wait_for_selector(".tt-panel")
    assert tpage.locator(".tt-tree .tt-agent").first.inner_text() == XSS
    assert XSS in tpage.locator("#step-1 .tt-meta").inner_text()
    assert tpage.evaluate("() => window.__xss") is None


def test_the_labelling_screen_shows_the_tree_too(tpage, live_server, login, annotator, span_trace, screenshot):
    login(tpage, annotator)
    tpage.goto(f"{live_server.url}/p/demo/traces/{span_trace.pk}/label/")
    tpage.wait_for_selector(".trace-viewer[data-tree='1'] .tt-panel")
    assert tpage.locator("#step-7 .tt-parent").inner_text() == "↳ #4"
    screenshot(tpage, "workspace-step-tree", full_page=False)
