"""Anti-anchoring in the labelling screen: no peer's label (nor Accept / Reject) before her own."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.annotations.labels.test_anchoring import _closed_round_with_peer_label, _submit
from tests.annotations.workspace_factories import make_trace

pytestmark = pytest.mark.browser


def test_peer_labels_of_a_closed_round_wait_for_her_submission(
    transactional_db, live_server, page, login, project, annotator, annotator2, screenshot
):
    trace = make_trace(project, title="outside the round")
    _closed_round_with_peer_label(project, annotator2, trace)
    login(page, annotator)
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/label/")
    expect(page.locator("[data-anchoring]")).to_be_visible()
    expect(page.locator(".ws-mode").first).to_be_visible()
    expect(page.locator(".ws-suggestion")).to_have_count(0)
    expect(page.locator("button:has-text('Accept')")).to_have_count(0)
    screenshot(page, "workspace_anchoring_held_back")
    _submit(trace, annotator)
    page.reload()
    expect(page.locator(".ws-suggestion").first).to_contain_text("ann2")
    expect(page.locator("[data-anchoring]")).to_have_count(0)
