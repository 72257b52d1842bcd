"""An annotator labels a whole trace with the keyboard only, loses the network, and loses nothing."""

from __future__ import annotations

import pytest

from annotations.models import Annotation, AnnotationEvent
from tests.annotations.workspace_factories import make_trace

pytestmark = pytest.mark.browser

DECISIONS = {  # 14 modes in screen order: y = present, x = absent
    "1.1": "y",
    "1.2": "x",
    "1.3": "x",
    "1.4": "y",
    "1.5": "x",
    "2.1": "x",
    "2.2": "x",
    "2.3": "y",
    "2.4": "x",
    "2.5": "x",
    "2.6": "x",
    "3.1": "x",
    "3.2": "x",
    "3.3": "y",
}


def wait_saved(page):
    page.wait_for_function("() => document.getElementById('ws-status').dataset.state === 'saved'", timeout=10000)


def open_workspace(page, live_server, trace):
    page.goto(f"{live_server.url}/p/{trace.project.slug}/traces/{trace.pk}/label/")
    page.wait_for_selector("#ws[data-ready='1']")
    page.wait_for_selector(".trace-viewer[data-ready='1']")


def test_keyboard_only_labelling_survives_a_network_drop(page, live_server, login, project, annotator, screenshot):
    trace = make_trace(
        project, n_steps=12, lines_per_step=4, title="ChatDev: snake game", agents=("CEO", "Programmer", "Reviewer")
    )
    nxt = make_trace(project, n_steps=3, title="next one")
    login(page, annotator)
    open_workspace(page, live_server, trace)
    kb = page.keyboard

    # Mode 1.1: look at step 2 in the trace (j j), attach it as evidence (e), say why (r ... Esc).
    kb.press("j")
    kb.press("j")
    kb.press("e")
    kb.press("r")
    kb.type("The programmer ignores the requested board size.")
    kb.press("Escape")
    # Every mode, top to bottom.
    for i, key in enumerate(DECISIONS.values()):
        if i:
            kb.press("ArrowDown" if i % 2 else "n")
        kb.press(key)
    kb.press("t")  # task succeeded: yes
    kb.press("t")  # ... no
    kb.press("o")
    kb.type("board size ignored")
    kb.press("Enter")
    kb.press("Escape")
    wait_saved(page)
    assert page.locator("#ws-progress").inner_text() == "14 of 14 modes decided"
    assert page.locator(".tv-step[data-step='2'] .tv-mark").first.inner_text() == "1.1"
    screenshot(page, "workspace-labelled", full_page=False)

    # The network drops: keep working, see "Offline", then get it back.
    page.context.set_offline(True)
    kb.press("p")  # 3.2
    kb.press("y")
    kb.press("d")  # definition of 3.2, one key away
    page.wait_for_selector("#ws-status[data-state='offline']", timeout=10000)
    assert "Offline" in page.locator("#ws-status").inner_text()
    screenshot(page, "workspace-offline", full_page=False)
    page.context.set_offline(False)
    wait_saved(page)

    kb.press("?")
    page.wait_for_selector("#ws-help:not([hidden])")
    screenshot(page, "workspace-help", full_page=False)
    kb.press("Escape")
    assert page.locator("#ws-help").is_hidden()

    # Reload: everything is there, from the server.
    page.reload()
    page.wait_for_selector("#ws[data-ready='1']")
    assert page.locator("#ws-progress").inner_text() == "14 of 14 modes decided"
    assert page.locator(".ws-mode[data-code='3.2'] [data-decision='present']").get_attribute("aria-pressed") == "true"
    ann = Annotation.objects.get(trace=trace, rater__user=annotator)
    labels = {lab.mode.code: lab for lab in ann.labels.select_related("mode")}
    expected = {code: ("present" if key == "y" else "absent") for code, key in DECISIONS.items()}
    expected["3.2"] = "present"
    assert {code: lab.decision for code, lab in labels.items()} == expected
    assert labels["1.1"].evidence == [{"step": 2}]
    assert labels["1.1"].rationale == "The programmer ignores the requested board size."
    assert (ann.task_success, list(ann.open_codes.values_list("name", flat=True))) == ("no", ["board size ignored"])

    # ] jumps to the evidence; Ctrl+Enter submits and opens the next trace of my queue.
    kb.press("]")
    page.wait_for_selector(".tv-step[data-step='2'].is-current", timeout=5000)
    kb.press("Control+Enter")
    page.wait_for_url(f"**/traces/{nxt.pk}/label/")
    ann.refresh_from_db()
    assert ann.state == "submitted"
    assert AnnotationEvent.objects.filter(annotation=ann, action="submit").count() == 1


def test_stale_tab_shows_a_conflict_instead_of_overwriting(page, live_server, login, project, annotator, screenshot):
    from annotations.labels.services import annotation_get_or_create, annotation_save

    trace = make_trace(project, n_steps=4, title="conflict")
    login(page, annotator)
    open_workspace(page, live_server, trace)
    # Meanwhile another tab saves first.
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    annotation_save(
        annotation=ann,
        by=annotator,
        base_revision=0,
        labels=[{"code": "1.1", "decision": "absent", "evidence": [], "rationale": "other tab"}],
        task_success="unknown",
        notes="",
        open_codes=[],
    )
    page.keyboard.press("y")
    page.wait_for_selector("#ws-status[data-state='conflict']", timeout=10000)
    assert page.locator("#ws-banner").is_visible()
    screenshot(page, "workspace-conflict", full_page=False)
    ann.refresh_from_db()
    assert ann.labels.get().decision == "absent"
    page.click("#ws-banner >> text=Load saved version")
    assert page.locator(".ws-mode[data-code='1.1'] [data-decision='absent']").get_attribute("aria-pressed") == "true"


def test_queue_and_accepting_a_revealed_suggestion(page, live_server, login, project, annotator, screenshot):
    from tests.annotations.workspace_factories import make_llm_annotation

    project.reveal_suggestions = True
    project.save()
    first = make_trace(project, n_steps=5, title="MetaGPT: median of a list")
    make_trace(project, n_steps=5, title="AG2: math chat")
    make_llm_annotation(first, name="gpt-judge", codes=("1.1",))
    login(page, annotator)
    page.goto(f"{live_server.url}/queue/")
    page.wait_for_selector("#queue-next")
    screenshot(page, "queue")
    page.click("#queue-next")
    page.wait_for_selector("#ws[data-ready='1']")
    suggestion = page.locator(".ws-mode[data-code='1.1'] .ws-suggestion")
    assert "gpt-judge (suggestion): present" in suggestion.inner_text()
    screenshot(page, "workspace-suggestion", full_page=False)
    page.keyboard.press("a")  # accept
    wait_saved(page)
    ann = Annotation.objects.get(trace=first, rater__user=annotator)
    assert ann.labels.get().decision == "present"
