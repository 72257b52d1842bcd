"""Build a release on the page with a real Celery worker, watch the progress bar finish, download the zip."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.annotations.releases_factories import (
    annotate,
    closed_round,
    decisions,
    human_rater,
    make_trace,
    other_rater,
)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def labelled(project, mast_version, manager, annotator, annotator2):
    traces = [make_trace(project, mas_name=fw) for fw in ("ChatDev", "MetaGPT", "AG2", "HyperAgent") * 5]
    rnd = closed_round(
        project,
        mast_version,
        {t: {"1.3"} if i % 2 else {"2.6", "3.3"} for i, t in enumerate(traces)},
        name="Calibration 1",
    )
    judge = other_rater("gpt-4o judge")
    for t in traces[:6]:
        for user in (annotator, annotator2):
            annotate(t, human_rater(user), mast_version, decisions(mast_version, {"1.3"}), round=rnd)
        annotate(t, judge, mast_version, decisions(mast_version, {"1.3", "3.2"}))
    return traces


def test_manager_builds_a_release_and_downloads_the_zip(
    page, live_server, login, manager, project, labelled, celery_worker_process, screenshot, tmp_path
):
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/releases/")
    screenshot(page, "release-empty")
    page.fill("input[name=title]", "Spring labels")
    page.check("input[name=majority]")
    page.click("#release-form button[type=submit]")
    card = page.locator("#release-1")
    card.wait_for()
    assert card.locator(".progress, .release-facts").count() == 1  # a progress bar, or already done
    page.wait_for_selector("#release-1[data-status=done]", timeout=60000)
    assert card.locator(".release-facts").inner_text().split()[1] == "20"
    card.locator(".release-files summary").click()
    screenshot(page, "release-list")
    with page.expect_download() as info:
        card.locator("a.release-download").click()
    path = tmp_path / "release.zip"
    info.value.save_as(path)
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist())
        records = [json.loads(line) for line in zf.read("demo-v1/data.jsonl").decode().splitlines()]
        manifest = json.loads(zf.read("demo-v1/manifest.json"))
    assert names == [
        "demo-v1/README.md",
        "demo-v1/data.csv",
        "demo-v1/data.jsonl",
        "demo-v1/data.parquet",
        "demo-v1/manifest.json",
    ]
    assert len(records) == 20 and manifest["title"] == "Spring labels"
    assert records[0]["mast_studio"]["judge"] == {
        "gpt-4o judge": {c: int(c in {"1.3", "3.2"}) for c in records[0]["mast_annotation"]}
    }
