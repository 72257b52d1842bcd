"""A person logs in, opens their projects and the taxonomy browser, in the real Chromium."""

import pytest

pytestmark = pytest.mark.browser


def test_login_project_list_and_taxonomy_browser(page, live_server, login, manager, project, screenshot):
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    screenshot(page, "login")
    login(page, manager)

    page.wait_for_selector("text=Demo project")
    screenshot(page, "project-list")
    page.click("text=Demo project")
    page.wait_for_selector("nav.tabs")
    screenshot(page, "project-overview")

    page.click("nav.mainnav >> text=Taxonomies")
    page.wait_for_selector("text=MAST")
    screenshot(page, "taxonomy-list")
    page.click("a:has-text('v1')")
    page.wait_for_selector("#mode-1\\.3")
    assert page.locator("article.mode").count() == 14
    screenshot(page, "taxonomy-version")

    page.click("button:has-text('Draft next version')")
    page.wait_for_selector("text=Restructure this draft")
    page.click("#mode-2\\.2 >> text=Edit")
    page.fill("textarea[name=definition]", "An agent guesses when it should ask.")
    page.click("button:has-text('Save')")
    page.wait_for_selector("text=2.2 updated")
    page.click("text=see what changed")
    page.wait_for_selector("table.diff")
    assert page.locator("tr.diff-changed").count() == 1
    screenshot(page, "taxonomy-diff")


def test_wrong_password_shows_an_error(page, live_server, manager):
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", manager.username)
    page.fill("input[name=password]", "not-the-password")
    page.click("button[type=submit]")
    page.wait_for_selector("text=didn't match")
    assert "/login/" in page.url
