"""In Chromium: a manager splits a mode in the mapping editor, then reads the agreed labels on the
new version, where the split's "present" values are unknown and counted (screenshots at 1440x900)."""

from __future__ import annotations

import pytest

from annotations.rounds.services import round_close
from taxonomy.models import CrossMapping
from taxonomy.services import mode_add, version_draft_from, version_publish
from tests.annotations.rounds_factories import make_review_round, make_traces

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_split_made_in_the_editor_shows_as_unknown_on_the_agreed_labels_page(
    page, live_server, login, project, manager, annotator, annotator2, mast_version, screenshot
):
    traces = make_traces(project, 5)
    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces, name="Round 1")
    round_close(round=rnd, by=manager)  # everyone said 1.1 present on the 5 traces
    draft = version_draft_from(source=mast_version, by=manager)
    mode_add(version=draft, code="1.7", name="Disobey output format", definition="Ignores the asked format.")
    v2 = version_publish(version=draft)

    login(page, manager)
    page.goto(f"{live_server.url}/taxonomies/mappings/?source={mast_version.pk}&target={v2.pk}")
    split = page.locator("[data-testid='split-1.1']")
    split.locator("summary").click()
    split.get_by_label("1.7 Disobey output format").check()
    screenshot(page, "mapping-editor-split")
    page.locator("[data-testid=mapping-form] button[type=submit]", has_text="Save mapping").click()
    page.wait_for_selector("text=Mapping from MAST v1 to MAST v2 saved")
    assert "split into 1.1, 1.7" in page.locator("[data-testid='split-1.1'] summary").inner_text()
    stored = CrossMapping.objects.filter(source=mast_version, target=v2, old_code="1.1")
    rows = set(stored.values_list("new_code", "kind"))
    assert rows == {("1.1", "split"), ("1.7", "split")}

    page.goto(f"{live_server.url}/p/{project.slug}/rounds/")
    page.get_by_test_id("agreed-link").click()
    assert page.get_by_test_id("ag-traces").inner_text() == "5"
    page.select_option("[data-testid=target-version]", str(v2.pk))
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(lambda url: f"version={v2.pk}" in url)
    assert page.get_by_test_id("ag-unknown").inner_text() == "10"  # 1.1 and 1.7 on each trace
    assert page.locator("td.ag-unknown").count() == 10
    assert "unknown on mast v2" in page.get_by_test_id("mapping-counts").inner_text().lower()
    screenshot(page, "agreed-labels-split")
