"""In the seeded demo (issue 31), a manager follows failures over time: the monitoring chart with
the demo's alert on it, the alerts page with the rule firing and its webhook, then an experiment
between two system variants of the demo and the demo's before/after pair, read from the table."""

from __future__ import annotations

import pytest

from annotations.experiments.selectors import experiment_compare
from annotations.models import AlertEvent, AlertRule
from traces.models import Trace

pytestmark = pytest.mark.browser


def test_a_manager_follows_the_demo_over_time_and_compares_variants(demo, page, live_server, login, screenshot):
    slug = demo.project.slug
    rule = AlertRule.objects.get(project=demo.project)
    assert rule.firing == ["3"] and AlertEvent.objects.filter(rule=rule).count() == 1
    login(page, demo.users["manager"])
    page.goto(f"{live_server.url}/p/{slug}/analytics/")
    page.get_by_role("link", name="Is it still working?").click()
    page.get_by_label("Labels").select_option(rule.source)
    page.get_by_role("button", name="Show").click()
    chart = page.locator("[data-testid=monitoring-chart]")
    assert "alert 3" in chart.locator("svg").inner_html()
    rows = page.locator("[data-testid=monitoring-table] tbody tr")
    assert rows.count() >= 8  # eight weeks of the demo's traces
    traces = sum(int(rows.nth(i).locator("td").nth(0).inner_text()) for i in range(rows.count()))
    judged = Trace.objects.filter(project=demo.project, annotations__rater_id=int(rule.source)).distinct()
    assert traces == judged.count()
    screenshot(page, "monitoring-demo")

    page.get_by_role("link", name="Alert rules and webhooks").click()
    assert "firing: 3" in page.locator("[data-testid=alert-rules]").inner_text()
    assert "above" in page.locator("[data-testid=alert-event]").first.inner_text()
    screenshot(page, "alerts-demo")

    page.goto(f"{live_server.url}/p/{slug}/analytics/experiment/")
    page.get_by_label("Cohort A").fill("mas_name:AG2")
    page.get_by_label("Cohort B").fill("mas_name:ChatDev")
    page.get_by_role("button", name="Compare").click()
    table = page.locator("[data-testid=experiment-table]")
    exp = experiment_compare(user=demo.users["manager"], project=demo.project, a="mas_name:AG2", b="mas_name:ChatDev")
    assert exp.n_a and exp.n_b  # the demo has agreed labels on both frameworks
    for row in exp.categories:
        cells = table.locator(f"tr[data-category='{row['code']}'] td")
        assert cells.nth(0).inner_text().startswith(f"{row['a']['k']}/{row['a']['n']}")
        assert cells.nth(1).inner_text().startswith(f"{row['b']['k']}/{row['b']['n']}")

    dates = sorted(Trace.objects.filter(project=demo.project).values_list("imported_at", flat=True))
    middle = dates[len(dates) // 2].date().isoformat()
    page.get_by_label("Cohort A").fill(f"imported:..{middle}")
    page.get_by_label("Cohort B").fill(f"imported:{middle}..")
    page.get_by_label("Labels").select_option(f"corrected:{rule.source}")
    page.get_by_role("button", name="Compare").click()
    assert "corrected by the human sample" in page.locator("[data-testid=corrected-caveat]").inner_text().lower()
    assert page.locator("[data-testid=experiment-table] tr[data-mode]").count() >= 14
    screenshot(page, "experiment-demo-before-after")
