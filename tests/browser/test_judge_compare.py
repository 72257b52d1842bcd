"""A manager compares three judge runs and an imported rater against a round's consensus, and the
CSV and LaTeX downloads say what the page says."""

import csv
import io
import json
from pathlib import Path

import pytest

from annotations.judge.imported import rater_import
from annotations.judge.runs import judge_run_create
from tests.annotations.conftest import drive, make_judge_traces
from tests.annotations.judge.test_judge_web import closed_round
from tests.llm_server import LLMServer

pytestmark = [pytest.mark.browser]


@pytest.fixture
def server():
    s = LLMServer(reasoning=True).start()
    yield s
    s.stop()


def test_comparison_page_shows_three_runs_and_an_imported_rater_with_cis_and_matching_downloads(
    page, live_server, login, manager, project, server, screenshot, settings
):
    settings.MAST_JUDGE_BACKOFF_BASE = 0.05
    traces = make_judge_traces(project, 12, words="again and again")
    rnd = closed_round(
        project,
        traces,
        {t.pk: ({"1.1", "1.3"} if i % 3 == 0 else {"1.3"} if i % 3 == 1 else set()) for i, t in enumerate(traces)},
        name="Pilot",
    )
    runs = [
        drive(
            judge_run_create(
                project=project, by=manager, provider=p, base_url=server.url, model="o1", start=False, timeout=5
            )
        )
        for p in ("openai", "mast")
    ]
    runs.append(drive(judge_run_create(project=project, by=manager, provider="baseline", start=False)))
    assert all(r.state == "done" for r in runs), [r.error for r in runs]
    rows = [
        {"content_hash": t.content_hash, "modes": {"1.1": i % 3 == 0, "1.3": i % 2 == 0, "2.1": False}}
        for i, t in enumerate(traces)
    ]
    imported = rater_import(
        project=project, by=manager, name="Lab B o1", text="\n".join(map(json.dumps, rows)), filename="b.jsonl"
    ).rater

    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.click("a:has-text('Compare judges')")
    for r in runs:
        page.check(f"input[name=s][value='run:{r.pk}']")
    page.check(f"input[name=s][value='rater:{imported.pk}']")
    page.select_option("select[name=round]", str(rnd.pk))
    page.click("button:has-text('Compare')")
    page.wait_for_selector(".compare-pooled")
    body = page.locator(".compare-pooled tbody tr")
    assert body.count() == 4
    assert page.locator("#small-sample-note").is_visible()  # 12 traces < 20
    shown = {}
    for i in range(4):
        row = body.nth(i)
        key = row.get_attribute("data-rater")
        cell = row.locator("td[data-stat=kappa]")
        value = cell.inner_text().split("\n")[0].strip()
        ci = cell.locator(".ci").inner_text().strip()
        shown[key] = (value, ci)
    imported_cell = shown[f"rater:{imported.pk}"]
    assert imported_cell[1].startswith("[") and imported_cell[1].endswith("]")  # an interval is shown
    assert (
        page.locator("[id^=prevalence]").first.is_visible()
        and page.locator("text=prediction-powered inference").count()
    )
    screenshot(page, "judge-compare")

    with page.expect_download() as dl:
        page.click("a:has-text('CSV')")
    text = Path(dl.value.path()).read_text(encoding="utf-8")
    pooled = {r["rater"]: r for r in csv.DictReader(io.StringIO(text)) if r["mode"] == "pooled"}
    labels = {f"run:{r.pk}": f"Run #{r.pk}: {r.rater.name} ({r.taxonomy_version.label})" for r in runs} | {
        f"rater:{imported.pk}": "Imported: Lab B o1"
    }
    for key, (value, ci) in shown.items():
        row = pooled[labels[key]]
        assert (row["kappa"] or "–") == value
        assert (f"[{row['kappa_low']}, {row['kappa_high']}]" if row["kappa_low"] else "") == ci
    with page.expect_download() as dl:
        page.click("a:has-text('LaTeX')")
    tex = Path(dl.value.path()).read_text(encoding="utf-8")
    for value, ci in shown.values():
        if value != "–":
            assert f"{value} {ci}" in tex
