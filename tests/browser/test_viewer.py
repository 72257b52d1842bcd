"""The trace viewer in the real browser: search, jumps, keyboard, lazy loading, XSS."""

import pytest

from tests.traces.viewer_factories import chatdev_log, trace_from_text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">"


@pytest.fixture
def huge_trace(project):
    return trace_from_text(project, chatdev_log(lines=20000, long_step_every=9), filename="huge.log", outcome="failure")


def open_trace(page, live_server, trace, suffix=""):
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/p/demo/traces/{trace.pk}/{suffix}")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    return errors


def card_count(page):
    return page.locator(".tv-step").count()


def test_trace_page_mounts_with_first_window_only(page, live_server, login, viewer, huge_trace, screenshot):
    login(page, viewer)
    errors = open_trace(page, live_server, huge_trace)
    assert errors == []
    assert 1 <= card_count(page) <= 60
    assert page.locator("#step-1 .tv-agent").inner_text() == "Chief Executive Officer"
    screenshot(page, "viewer-trace-page", full_page=False)
