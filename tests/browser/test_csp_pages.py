"""A manager walks through every main page of the demo under the Content-Security-Policy: the browser
refuses nothing (no console "Refused to ...", no securitypolicyviolation event, no htmx eval) and
every asset the pages ask for is there. One screenshot per page, to look at."""

from __future__ import annotations

import pytest

from annotations.models import OpenCode, Round
from traces.models import Trace

pytestmark = pytest.mark.browser

# Runs before any page script, so violations during parsing are caught too.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.effectiveDirective} refused ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
});
document.addEventListener("htmx:evalDisallowedError", () => window.__csp.push("htmx wanted to eval"));
"""


def main_pages(demo) -> list[tuple[str, str, str]]:
    """(name, path, selector that shows the page is drawn) for each main page."""
    slug = demo.project.slug
    trace = Trace.objects.filter(project=demo.project).order_by("pk").first()
    pilot = Round.objects.get(project=demo.project, name="Pilot round")
    v1, v2 = pilot.taxonomy_version, Round.objects.get(project=demo.project, name="Round 2").taxonomy_version
    promoted = OpenCode.objects.get(project=demo.project, promoted_mode__isnull=False)  # the demo promotes one
    return [
        ("home", "/", "main"),
        ("project", f"/p/{slug}/", "nav.tabs"),
        ("traces", f"/p/{slug}/traces/", ".tl-table"),
        ("trace", f"/p/{slug}/traces/{trace.pk}/", ".trace-viewer[data-ready='1']"),
        ("workspace", f"/p/{slug}/traces/{trace.pk}/label/", "#ws[data-ready='1']"),
        ("rounds", f"/p/{slug}/rounds/", ".rd-list"),
        ("round-new", f"/p/{slug}/rounds/new/", "#round-form"),
        ("round-report", f"/p/{slug}/rounds/{pilot.pk}/report/", ".rd-heat"),
        ("judge", f"/p/{slug}/judge/", "main"),
        ("judge-new", f"/p/{slug}/judge/new/", "#judge-run-form"),
        ("analytics", f"/p/{slug}/analytics/", "figure.chart"),
        ("monitoring", f"/p/{slug}/analytics/monitoring/", "main"),
        ("alerts", f"/p/{slug}/analytics/alerts/", "[data-testid=alert-rules]"),
        ("open-codes", f"/p/{slug}/codes/", "[data-testid=codes-table]"),
        ("open-code", f"/p/{slug}/codes/{promoted.pk}/", "[data-testid=promoted]"),
        ("open-code-promote", f"/p/{slug}/codes/{promoted.pk}/promote/", "[data-testid=promote-form]"),
        ("agreed-labels", f"/p/{slug}/agreed/", "[data-testid=agreed-table]"),
        ("mappings", f"/taxonomies/mappings/?source={v1.pk}&target={v2.pk}", "[data-testid=mapping-form]"),
        ("releases", f"/p/{slug}/releases/", "main"),
        ("import", f"/p/{slug}/import/", ".import-form"),
        ("taxonomies", "/taxonomies/", "main"),
        ("api-docs", "/api/docs/", ".swagger-ui .info .title"),
    ]


def test_main_pages_break_no_rule_of_the_policy(demo, page, live_server, login, screenshot):
    refused: list[str] = []
    missing: list[str] = []

    def on_console(msg):
        if "Content Security Policy" in msg.text:
            refused.append(msg.text)

    def on_response(response):
        # The browser asks for /favicon.ico by itself; the pages never link one.
        ours = response.url.startswith(live_server.url) and not response.url.endswith("/favicon.ico")
        if ours and response.status >= 400:
            missing.append(f"{response.status} {response.url}")

    page.on("console", on_console)
    page.on("response", on_response)
    page.add_init_script(RECORD_VIOLATIONS)
    login(page, demo.users["manager"])
    problems = {}
    for name, path, ready in main_pages(demo):
        refused.clear()
        missing.clear()
        page.goto(f"{live_server.url}{path}", wait_until="networkidle")
        page.wait_for_selector(ready)
        page.wait_for_timeout(300)  # late work: lazy steps, htmx "load" triggers, the docs' schema fetch
        found = refused + missing + page.evaluate("window.__csp")
        if found:
            problems[name] = found
        screenshot(page, f"csp-{name}", full_page=False)
    assert not problems, "\n".join(f"{name}: {line}" for name, lines in problems.items() for line in lines)


def test_dropdown_filters_still_apply_themselves(demo, page, live_server, login):
    """trace-list.js (was inline): changing a filter submits the form."""
    login(page, demo.users["manager"])
    page.goto(f"{live_server.url}/p/{demo.project.slug}/traces/")
    page.select_option("select[name=sort]", "steps")
    page.wait_for_url("**sort=steps**")


def test_redoc_works_and_only_its_calls_home_are_refused(demo, page, live_server, login, screenshot):
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    login(page, demo.users["manager"])
    page.goto(f"{live_server.url}/api/redoc/", wait_until="networkidle")
    page.wait_for_selector(".api-content h1")
    page.fill("input[placeholder='Search...']", "release")  # the search runs in the blob: worker
    page.wait_for_selector("[data-role='search:results'] li")
    screenshot(page, "csp-api-redoc", full_page=False)
    calls_home = ("fonts.googleapis.com", "cdn.redoc.ly")
    assert refused and all(any(host in line for host in calls_home) for line in refused), refused
