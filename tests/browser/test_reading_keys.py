"""Issue 15's reading fixes, in the real browser: the first `j`, sticky step headers, `d` with examples."""

import pytest

from tests.annotations.workspace_factories import make_trace
from tests.traces.viewer_factories import chatdev_log, trace_from_text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def current_step(page) -> str | None:
    return page.evaluate("() => document.querySelector('.tv-step.is-current')?.dataset.step ?? null")


def top_in_scroller(page, selector) -> float:
    """How far below the top of the viewer's scroll area the element's top edge is (px)."""
    return page.evaluate(
        """(sel) => document.querySelector(sel).getBoundingClientRect().top
                    - document.querySelector('.tv-scroll').getBoundingClientRect().top""",
        selector,
    )


def test_first_j_on_the_trace_page_moves_to_the_next_step(page, live_server, login, viewer, project):
    trace = trace_from_text(project, chatdev_log(lines=600), filename="j.log")
    login(page, viewer)
    page.goto(f"{live_server.url}/p/demo/traces/{trace.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    page.keyboard.press("j")
    page.wait_for_function("() => document.querySelector('.tv-step.is-current')?.dataset.step === '1'", timeout=5000)
    assert 0 <= top_in_scroller(page, "#step-1") < 40  # scrolled to it


def test_first_j_on_the_labelling_screen_moves_to_the_next_step(page, live_server, login, project, annotator):
    trace = make_trace(project, n_steps=30, lines_per_step=6, agents=("CEO", "Programmer"))
    login(page, annotator)
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/label/")
    page.wait_for_selector("#ws[data-ready='1']")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    page.keyboard.press("j")
    page.wait_for_function("() => document.querySelector('.tv-step.is-current')?.dataset.step === '1'", timeout=5000)
    assert page.locator(".ws-attach").first.inner_text() == "+ Attach step 1"


def test_a_long_steps_header_stays_in_view_while_reading_inside_it(
    page, live_server, login, viewer, project, screenshot
):
    # every 3rd message is 60+ lines: collapsed, "Show all" expands it
    trace = trace_from_text(project, chatdev_log(lines=900, long_step_every=3), filename="long.log")
    login(page, viewer)
    page.goto(f"{live_server.url}/p/demo/traces/{trace.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    card = page.locator(".tv-step.is-collapsed").first
    step = card.get_attribute("data-step")
    card.locator(".tv-expand").click()
    page.wait_for_selector(f"#step-{step}.is-expanded")
    # scroll so that the step's 40th line is at the top of the scroller: its header is far above
    page.evaluate(
        """(step) => {
            const s = document.querySelector('.tv-scroll');
            const row = document.querySelectorAll(`#step-${step} .tv-line`)[40];
            s.scrollTop += row.getBoundingClientRect().top - s.getBoundingClientRect().top;
        }""",
        step,
    )
    page.wait_for_timeout(100)
    head = f"#step-{step} .tv-step-head"
    assert -1 <= top_in_scroller(page, head) <= 2  # pinned to the top of the scroller
    # and nothing covers it: the element at its centre is the header (or inside it)
    covered = page.evaluate(
        """(sel) => { const h = document.querySelector(sel); const r = h.getBoundingClientRect();
                      const at = document.elementFromPoint(r.left + 60, r.top + r.height / 2);
                      return !h.contains(at); }""",
        head,
    )
    assert not covered
    assert page.locator(head + " .tv-agent").is_visible()
    screenshot(page, "sticky-step-header", full_page=False)


def test_d_shows_the_definition_and_the_examples(page, live_server, login, project, annotator, screenshot):
    from taxonomy.mast_v1 import EXAMPLES

    trace = make_trace(project, n_steps=8)
    login(page, annotator)
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/label/")
    page.wait_for_selector("#ws[data-ready='1']")
    page.keyboard.press("n")  # mode 1.2
    page.keyboard.press("d")
    box = page.locator(".ws-mode[data-code='1.2'] .ws-def")
    box.wait_for(state="visible", timeout=5000)
    text = box.inner_text()
    assert "DEFINITION" in text.upper() and "steps outside the responsibilities" in text
    assert "EXAMPLES" in text.upper() and EXAMPLES["1.2"][:40] in text
    screenshot(page, "definition-and-examples", full_page=False)
