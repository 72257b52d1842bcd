"""A submitted annotation changes only on purpose: keys do nothing on it until its author reopens it;
reopened, it counts as not submitted in the round's progress until she submits again, and its
history records each step."""

from __future__ import annotations

import pytest

from annotations.models import Annotation, AnnotationEvent
from tests.annotations.workspace_factories import make_round, make_trace

pytestmark = pytest.mark.browser

CODES = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]


def open_label_page(page, live_server, trace, rnd):
    page.goto(f"{live_server.url}/p/{trace.project.slug}/traces/{trace.pk}/label/?round={rnd.pk}")
    page.wait_for_selector("#ws[data-ready='1']")
    page.wait_for_selector(".trace-viewer[data-ready='1']")


def round_progress_text(page, live_server, rnd) -> str:
    page.goto(f"{live_server.url}/p/{rnd.project.slug}/rounds/{rnd.pk}/")
    return page.locator(".rd-big").inner_text()


def stored(ann):
    ann.refresh_from_db()
    labels = sorted(ann.labels.values_list("mode__code", "decision", "rationale"))
    return ann.state, ann.task_success, ann.revision, labels


def test_submit_reopen_change_resubmit(page, live_server, login, project, annotator, screenshot):
    trace = make_trace(project, n_steps=6, lines_per_step=3, title="read only once submitted")
    rnd = make_round(project, traces=[trace], annotators=[annotator])
    login(page, annotator)
    open_label_page(page, live_server, trace, rnd)
    kb = page.keyboard

    # Label every mode (1.1 present with a reason, the rest absent), say the task failed, submit.
    kb.press("y")
    kb.press("r")
    kb.type("Asked twice, answered once.")
    kb.press("Escape")
    for _ in CODES[1:]:
        kb.press("ArrowDown")
        kb.press("x")
    kb.press("t")
    kb.press("t")  # yes -> no
    page.wait_for_function("() => document.getElementById('ws-status').dataset.state === 'saved'", timeout=10000)
    kb.press("Control+Enter")
    page.wait_for_url(lambda url: "/label/" not in url or f"round={rnd.pk}" not in url, timeout=10000)
    ann = Annotation.objects.get(trace=trace, round=rnd)
    submitted = stored(ann)
    assert submitted[:2] == ("submitted", "no")
    assert round_progress_text(page, live_server, rnd).startswith("1")

    # Back on the submitted trace: read only, keys do nothing but move.
    open_label_page(page, live_server, trace, rnd)
    assert page.locator("#ws-status").get_attribute("data-state") == "locked"
    assert page.locator("#ws-submitted").is_visible()
    for key in ("x", "u", " ", "t", "e", "E", "a"):
        kb.press(key)
    kb.press("ArrowDown")
    kb.press("r")
    kb.type("stray keystrokes")
    kb.press("Escape")
    assert page.locator(".ws-mode.is-current").get_attribute("data-code") == "1.2"  # moving still works
    assert page.locator(".ws-mode[data-code='1.1'] [data-decision='present']").get_attribute("aria-pressed") == "true"
    page.wait_for_timeout(800)  # longer than the autosave delay: nothing may be sent
    assert stored(ann) == submitted
    screenshot(page, "workspace-submitted-read-only", full_page=False)

    # Reopen: a draft again, counted as not submitted.
    page.click("#ws-reopen")
    page.wait_for_selector("#ws[data-state='draft'][data-ready='1']", timeout=10000)
    assert page.locator("#ws-state-badge").inner_text() == "Draft"
    assert stored(ann)[0] == "draft"
    assert round_progress_text(page, live_server, rnd).startswith("0")

    # Change: the reason of 1.1 and "task succeeded"; then submit again.
    open_label_page(page, live_server, trace, rnd)
    kb.press("r")
    kb.press("End")
    kb.type(" Then gave up.")
    kb.press("Escape")
    kb.press("t")  # no -> unknown
    page.wait_for_function("() => document.getElementById('ws-status').dataset.state === 'saved'", timeout=10000)
    kb.press("Control+Enter")
    page.wait_for_url(lambda url: "/label/" not in url or f"round={rnd.pk}" not in url, timeout=10000)
    state, task, _, labels = stored(ann)
    assert (state, task) == ("submitted", "unknown")
    assert labels[0] == ("1.1", "present", "Asked twice, answered once. Then gave up.")
    assert round_progress_text(page, live_server, rnd).startswith("1")
    screenshot(page, "round-progress-after-resubmit", full_page=False)

    # The history (as the API gives it to her) shows each step.
    history = page.request.get(
        f"{live_server.url}/api/projects/{project.slug}/traces/{trace.pk}/annotation/history/?round={rnd.pk}"
    ).json()
    events = history["results"] if isinstance(history, dict) else history
    actions = [e["action"] for e in events]
    assert actions[-3:] == ["reopen", "save", "submit"] and actions.count("submit") == 2
    assert list(AnnotationEvent.objects.filter(annotation=ann).values_list("action", flat=True)) == actions
