"""A manager runs the same judge twice, opens "Self-agreement & drift" from the runs page and from
the run page, and reads the judge's kappa per mode beside the humans' kappa of the closed round."""

import pytest

from tests.annotations.conftest import make_judge_traces
from tests.annotations.judge.test_reliability import FIRST, SECOND, ScriptedJudge, closed_human_round, run_judge
from tests.browser.demo_pages import axe_violations

pytestmark = [pytest.mark.browser]


@pytest.fixture
def judge():
    j = ScriptedJudge()
    j.server.start()
    yield j
    j.server.stop()


def test_self_agreement_page_shows_the_judge_beside_the_humans(
    page, live_server, login, manager, project, judge, screenshot
):
    traces = make_judge_traces(project, 8)
    rnd, _ = closed_human_round(project, manager, traces)
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)

    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.click("a:has-text('Self-agreement & drift')")
    page.wait_for_selector("#reliability-pairs")
    assert "self-agreement (the same judge)" in page.locator("#reliability-pairs").inner_text()
    page.click("#reliability-pairs a:has-text('Compare')")
    page.wait_for_selector("#reliability-modes")
    kappa = page.locator("#reliability-modes tr[data-mode='1.1'] td[data-stat=kappa]").inner_text()
    assert kappa.startswith("0.50")
    undefined = page.locator("#reliability-modes tr[data-mode='1.2'] td[data-stat=kappa]").inner_text()
    assert "both constant" in undefined  # said, not shown as 0
    human = page.locator("#reliability-modes tr[data-mode='1.3'] td[data-stat=human]").inner_text()
    assert human.startswith("0.00")  # the round's stored per-mode kappa
    assert rnd.name in page.locator("#reliability-summary").inner_text()
    assert page.locator("#small-sample-note").is_visible()
    screenshot(page, "judge-reliability")
    assert axe_violations(page) == []

    # the run page links to the same comparison
    page.goto(f"{live_server.url}/p/{project.slug}/judge/runs/{second.pk}/")
    page.click("a:has-text('Self-agreement & drift')")
    page.wait_for_selector("#reliability-modes")
    assert f"#{first.pk}" in page.locator("#reliability-summary h2").inner_text()
    page.goto(f"{live_server.url}/p/{project.slug}/judge/runs/{second.pk}/")
    screenshot(page, "judge-run-with-reliability-link", full_page=False)
