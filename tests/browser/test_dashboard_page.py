"""The analytics dashboard in a real browser: charts render, PNG download works, screenshots."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.annotations.releases_factories import all_codes, annotate, closed_round, decisions, make_trace, other_rater

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FRAMEWORKS = ["ChatDev", "MetaGPT", "AG2", "HyperAgent", "AppWorld", "Magentic-One", "OpenManus"]


@pytest.fixture
def realistic(project, mast_version, manager, viewer):
    """60 traces over seven frameworks with correlated failure labels, adjudicated in a closed round."""
    rng = random.Random(3)
    codes = all_codes(mast_version)
    rates = {c: 0.05 + 0.35 * rng.random() for c in codes}
    adjudicated = {}
    judge = other_rater("gpt-4o judge")
    for i in range(60):
        fw = FRAMEWORKS[i % len(FRAMEWORKS)]
        t = make_trace(
            project,
            mas_name=fw,
            llm_name="gpt-4o" if i % 3 else "claude-3.7",
            benchmark="ProgramDev",
            n_steps=rng.randint(8, 80),
            n_agent_switches=rng.randint(2, 30),
            n_repeated_steps=rng.randint(0, 10),
            outcome=rng.choice(["success", "failure", ""]),
        )
        present = {c for c in codes if rng.random() < rates[c] * (1.6 if fw == "ChatDev" else 1)}
        if "1.3" in present and rng.random() < 0.7:
            present.add("3.3")
        adjudicated[t] = present
        annotate(t, judge, mast_version, decisions(mast_version, {c for c in present if rng.random() < 0.8}))
    closed_round(project, mast_version, adjudicated, name="Calibration 1")
    return adjudicated


def test_dashboard_renders_every_chart_and_downloads_a_png(
    page, live_server, login, viewer, project, realistic, screenshot, tmp_path
):
    login(page, viewer)
    page.goto(f"{live_server.url}/p/{project.slug}/analytics/")
    assert page.locator("[data-testid=n-traces]").inner_text() == "60"
    names = page.locator("figure.chart").evaluate_all("els => els.map(e => e.dataset.chart)")
    assert names == [
        "modes_failures",
        "modes_traces",
        "categories",
        "frameworks_categories",
        "frameworks_rate",
        "corr_modes",
        "corr_categories",
        "efficiency",
    ]
    screenshot(page, "dashboard")
    page.add_style_tag(content=".topbar { position: static !important; }")  # keep it out of element shots
    for name in ("modes_failures", "frameworks_categories", "corr_modes", "corr_categories", "efficiency"):
        page.locator(f"#chart-{name}").screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"))
    with page.expect_download() as info:
        page.locator("#chart-modes_failures .png-download").click()
    path = tmp_path / "chart.png"
    info.value.save_as(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cohort_comparison_in_the_browser(page, live_server, login, viewer, project, realistic, screenshot):
    login(page, viewer)
    page.goto(f"{live_server.url}/p/{project.slug}/analytics/")
    page.select_option("select[name=a]", "mas_name:ChatDev")
    page.select_option("select[name=b]", "mas_name:MetaGPT")
    page.click("form[aria-label='Cohort comparison'] button[type=submit]")
    page.wait_for_selector("#chart-cohort")
    assert page.locator("#chart-cohort table tbody tr").count() == 14
    screenshot(page, "dashboard-cohort")
    page.add_style_tag(content=".topbar { position: static !important; }")
    page.locator("#chart-cohort").screenshot(path=str(ARTIFACTS / "dashboard-cohort-chart.png"))


def test_stat_cards_line_up(page, live_server, login, viewer, project):
    """The three stat cards sit on one row with the same top and height (a stacked card's top margin
    once pushed the second and third down)."""
    login(page, viewer)
    page.goto(f"{live_server.url}/p/{project.slug}/analytics/")
    boxes = [c.bounding_box() for c in page.locator(".dash-stats > .card").all()]
    assert len(boxes) == 3
    assert {round(b["y"]) for b in boxes} == {round(boxes[0]["y"])}
    assert {round(b["height"]) for b in boxes} == {round(boxes[0]["height"])}
