"""The save protocol's paths that test_workspace.py does not walk: a draft kept in the browser while
offline reaches the server when the screen is opened again, and "Keep mine" after a conflict with
another tab replaces that tab's save, knowingly."""

from __future__ import annotations

import pytest

from annotations.models import Annotation
from tests.annotations.workspace_factories import make_trace

pytestmark = pytest.mark.browser


def open_workspace(page, live_server, trace):
    page.goto(f"{live_server.url}/p/{trace.project.slug}/traces/{trace.pk}/label/")
    page.wait_for_selector("#ws[data-ready='1']")


def decisions(trace, user) -> dict[str, str]:
    ann = Annotation.objects.get(trace=trace, rater__user=user)
    return {lab.mode.code: lab.decision for lab in ann.labels.select_related("mode")}


def test_a_change_made_offline_is_sent_when_the_screen_opens_again(page, live_server, login, project, annotator):
    trace = make_trace(project, n_steps=4, title="offline draft")
    login(page, annotator)
    open_workspace(page, live_server, trace)
    page.context.set_offline(True)
    page.keyboard.press("y")
    page.wait_for_selector("#ws-status[data-state='offline']", timeout=10000)
    page.close()
    assert not Annotation.objects.filter(trace=trace).exists()

    page.context.set_offline(False)
    again = page.context.new_page()  # same browser profile: the draft is in its localStorage
    open_workspace(again, live_server, trace)
    again.wait_for_selector("#ws-status[data-state='saved']", timeout=10000)
    assert decisions(trace, annotator) == {"1.1": "present"}
    assert again.evaluate("() => Object.keys(localStorage).filter((k) => k.startsWith('mast-ws:'))") == []


def test_keep_mine_replaces_what_another_tab_saved(page, live_server, login, project, annotator):
    trace = make_trace(project, n_steps=4, title="keep mine")
    login(page, annotator)
    open_workspace(page, live_server, trace)
    other = page.context.new_page()
    open_workspace(other, live_server, trace)
    other.keyboard.press("x")
    other.wait_for_selector("#ws-status[data-state='saved']", timeout=10000)
    assert decisions(trace, annotator) == {"1.1": "absent"}

    page.bring_to_front()
    page.keyboard.press("y")  # still based on revision 0
    page.wait_for_selector("#ws-status[data-state='conflict']", timeout=10000)
    assert decisions(trace, annotator) == {"1.1": "absent"}  # nothing overwritten yet
    page.click("#ws-banner >> text=Keep mine")
    page.wait_for_selector("#ws-status[data-state='saved']", timeout=10000)
    assert page.locator("#ws-banner").is_hidden()
    assert decisions(trace, annotator) == {"1.1": "present"}
