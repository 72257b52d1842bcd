"""Error pages in the site's layout: navigation, the reason where safe, and a way back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_forbidden_page_keeps_the_navigation_and_leads_back(
    transactional_db, live_server, page, login, viewer, project, screenshot
):
    login(page, viewer)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    # As when a link or a bookmarklet from the project page leads there (goto sends no Referer itself).
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/new/", referer=f"{live_server.url}/p/{project.slug}/")
    expect(page.locator("nav.mainnav")).to_be_visible()
    expect(page.locator("h1")).to_have_text("You may not do this")
    expect(page.locator(".error-reason")).to_contain_text(f"Your role in {project.name} (viewer) does not allow this.")
    screenshot(page, "error_403")
    page.click("a[data-error-back]")
    expect(page).to_have_url(f"{live_server.url}/p/{project.slug}/")


def test_not_found_page_keeps_the_navigation(transactional_db, live_server, page, login, annotator, screenshot):
    login(page, annotator)
    page.goto(f"{live_server.url}/p/nowhere/traces/")
    expect(page.locator("nav.mainnav")).to_be_visible()
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator(".error-reason")).to_contain_text("No such project.")
    screenshot(page, "error_404")
    page.click("text=Go to your projects")
    expect(page).to_have_url(f"{live_server.url}/")
