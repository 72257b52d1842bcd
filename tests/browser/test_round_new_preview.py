"""Creating a round: the sample preview follows every field that changes the sample."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.annotations.rounds_factories import make_traces

pytestmark = pytest.mark.browser


def test_preview_refreshes_when_method_size_and_trace_ids_change(
    transactional_db, live_server, page, login, manager, annotator, annotator2, project, screenshot
):
    traces = make_traces(project, 12)
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/new/")
    preview = page.locator("#preview")
    summary = preview.locator(".rd-preview-summary")
    # On load, before any field is touched (the form's default: 10 traces stratified by framework).
    expect(summary).to_contain_text("stratified by framework")
    expect(preview.locator("tbody tr")).to_have_count(10)

    page.check("input[name=method][value=random]")
    expect(summary).to_contain_text("drawn at random")
    page.fill("#id_n", "4")
    expect(preview.locator("tbody tr")).to_have_count(4)
    page.fill("#id_seed", "7")
    expect(summary).to_contain_text("seed 7")

    page.check("input[name=method][value=manual]")
    expect(preview).not_to_contain_text("stratified")
    page.fill("#id_trace_ids", f"{traces[0].pk} {traces[5].pk}")
    expect(summary).to_contain_text("picked by hand")
    expect(preview.locator("tbody tr")).to_have_count(2)
    page.fill("#id_trace_ids", f"{traces[0].pk}")
    expect(preview.locator("tbody tr")).to_have_count(1)
    screenshot(page, "round_new_preview")


def test_flash_names_the_round_once(
    transactional_db, live_server, page, login, manager, annotator, annotator2, project
):
    traces = make_traces(project, 3)
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/new/")
    page.fill("#id_name", "Round 3 (real traces)")
    page.check(f"input[name=annotators][value='{annotator.pk}']")
    page.check(f"input[name=annotators][value='{annotator2.pk}']")
    page.check("input[name=method][value=manual]")
    page.fill("#id_trace_ids", " ".join(str(t.pk) for t in traces))
    page.click("button[type=submit]:has-text('Create draft round')")
    expect(page.locator(".messages")).to_contain_text("Round 3 (real traces) created as a draft")
    expect(page.locator(".messages")).not_to_contain_text("Round Round")
