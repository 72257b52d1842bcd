"""Review: the "N still to decide" counter follows each "Record decision" without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.annotations.rounds_factories import make_review_round, make_traces

pytestmark = pytest.mark.browser


def test_counter_drops_after_each_decision(
    transactional_db, live_server, page, login, project, manager, annotator, annotator2, screenshot
):
    traces = make_traces(project, 3)
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces
    )
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/{rnd.pk}/disagreements/")
    counter = page.locator("#rd-open-count")
    expect(counter).to_have_text("3 still to decide")
    for left in ("2 still to decide", "1 still to decide", "all decided"):
        card = page.locator("article.rd-dis:not(.rd-dis-decided)").first
        card.locator("input[value=present]").check()
        card.locator("button:has-text('Record decision')").click()
        expect(counter).to_have_text(left)
    expect(page.locator("article.rd-dis-decided")).to_have_count(3)
    screenshot(page, "review_counter_all_decided")
