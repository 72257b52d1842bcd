"""Every page of the demo, as a manager, an annotator and a viewer, checked with axe-core (vendored
from the npm registry, tests/browser/vendor/): no serious or critical violation, and nothing drawn
as clickable that the keyboard cannot reach. The same walk saves screenshots of every page at
1440x900 and 1280x720 into test-artifacts/pages/, to be looked at.

One seeded demo, one browser and one walk per role for the whole module: a page costs a load, an
axe run and its screenshots, not a server or a seed."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from annotations.demo import seed_demo
from tests.browser.demo_pages import axe_violations, demo_pages, mouse_only_controls

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

ROLES = {"manager": "manager", "annotator": "alice", "viewer": "victor"}
SIZES = ((1440, 900), (1280, 720))
# The manager sees every page; the others are photographed where their page differs (their queue,
# what a round shows them, the labelling screen); everything else they get is the 403 page.
OTHER_ROLES_SCREENSHOTS = {
    "home",
    "queue",
    "project",
    "rounds",
    "round-open",
    "round-review",
    "disagreements",
    "workspace",
    "releases",
    "judge",
    "not-found",
}


def _walk(browser, base_url: str, username: str, password: str, *, role: str) -> dict[str, dict[str, list[str]]]:
    shots = ARTIFACTS / "pages"
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    found: dict[str, dict[str, list[str]]] = {"axe": {}, "keyboard": {}}
    errors: dict[int, str] = {}  # status -> the first page that answered the error page with it
    try:
        for p in demo_pages():
            response = page.goto(f"{base_url}{p.path}", wait_until="networkidle")
            # A page this role may not open is the site's error page: checked like any other, once
            # per status (the same template again: its verdict is the first one's)
            page.wait_for_selector(p.ready if response.ok else ".error-page")
            first = errors.setdefault(response.status, p.name) if not response.ok else p.name
            if first != p.name:
                found["axe"][p.name], found["keyboard"][p.name] = found["axe"][first], found["keyboard"][first]
            else:
                found["axe"][p.name] = axe_violations(page)
                found["keyboard"][p.name] = mouse_only_controls(page)
            if role == "manager" or p.name in OTHER_ROLES_SCREENSHOTS:
                for width, height in SIZES:
                    page.set_viewport_size({"width": width, "height": height})
                    page.screenshot(path=str(shots / f"{role}-{p.name}-{width}x{height}.png"), full_page=True)
                page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
    finally:
        context.close()
    return found


@pytest.fixture(scope="module")
def axe_walk(django_db_setup, django_db_blocker, live_server, browser):
    """{role: {"axe" | "keyboard": {page name: [problems]}}} for the seeded demo; the database is emptied after."""
    from tests.factories import PASSWORD

    with django_db_blocker.unblock():
        ctx = seed_demo()
        for username in ROLES.values():
            ctx.users[username].set_password(PASSWORD)
            ctx.users[username].save()
        try:
            yield {
                role: _walk(browser, live_server.url, username, PASSWORD, role=role) for role, username in ROLES.items()
            }
        finally:
            # ids are never reused (per-process caches key on them), so the sequences stay as they are
            call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


@pytest.mark.parametrize("role", list(ROLES))
def test_no_page_has_a_serious_or_critical_axe_violation(axe_walk, role):
    pages = axe_walk[role]["axe"]
    assert len(pages) > 40, sorted(pages)  # the walk reached every page, not just the first
    bad = {name: lines for name, lines in pages.items() if lines}
    report = "\n".join(f"{role} {name}: {line}" for name, lines in bad.items() for line in lines)
    print(report)
    assert not bad, f"axe-core found serious/critical violations on {len(bad)} page(s):\n{report}"


@pytest.mark.parametrize("role", list(ROLES))
def test_every_control_is_reachable_by_keyboard(axe_walk, role):
    pages = axe_walk[role]["keyboard"]
    assert len(pages) > 40, sorted(pages)
    bad = {name: found for name, found in pages.items() if found}
    assert not bad, f"drawn as clickable but out of the keyboard's reach (not focusable, in nothing focusable): {bad}"
