"""A researcher compares two system variants in the browser (issue 31): the experiment page reads
the cohorts, shows each mode's shares and difference, says what it cannot read, downloads CSV."""

from __future__ import annotations

import pytest

from tests.annotations.releases_factories import closed_round, make_trace

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_researcher_compares_two_variants_and_reads_the_table(page, live_server, login, manager, project,
                                                               mast_version, screenshot):  # fmt: skip
    labelled = {}
    for k in range(12):
        labelled[make_trace(project, mas_name="ChatDev", metadata={"variant": "v1"})] = {"1.3"} if k < 9 else set()
        labelled[make_trace(project, mas_name="ChatDev", metadata={"variant": "v2"})] = {"1.3"} if k < 2 else set()
    closed_round(project, mast_version, labelled)

    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/analytics/")
    page.get_by_role("link", name="Did the fix work?").click()
    page.get_by_label("Cohort A").fill("meta.variant:v1")
    page.get_by_label("Cohort B").fill("meta.variant:v2")
    page.get_by_role("button", name="Compare").click()

    row = page.locator("[data-testid=experiment-table] tr[data-mode='1.3']")
    assert "9/12" in row.locator("td").nth(0).inner_text()
    assert "2/12" in row.locator("td").nth(1).inner_text()
    assert "-58.3 pts" in row.locator("td").nth(2).inner_text()
    assert "moved" in row.inner_text()
    assert "no test" in page.locator("tr[data-mode='3.3']").inner_text()
    screenshot(page, "experiment-compare")

    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename == f"{project.slug}-experiment.csv"
    with page.expect_download() as download:
        page.get_by_role("link", name="LaTeX").click()
    assert "\\toprule" in download.value.path().read_text(encoding="utf-8")

    page.get_by_label("Cohort A").fill("team:red")
    page.get_by_role("button", name="Compare").click()
    assert "unknown field" in page.get_by_role("alert").inner_text()
