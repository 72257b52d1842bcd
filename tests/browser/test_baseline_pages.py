"""In Chromium: after the project moves to a new taxonomy version, a baseline on it trains on the
older agreed labels through the mapping, and its run and quality pages say its scores are
cross-fitted; a baseline that could not be trained is titled as the baseline and offers no Resume
(screenshots at 1440x900)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.judge.runs import judge_run_create, judge_run_start
from taxonomy.services import mode_rename, mode_split, version_draft_from, version_publish
from tests.annotations.conftest import make_judge_traces
from tests.annotations.judge.test_judge_web import closed_round

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CROSS_FITTED = (
    "scores on training traces are cross-fitted: each trace was predicted by a model that did not see it (k=5)"
)


def baseline(project, manager, version):
    run = judge_run_create(project=project, by=manager, provider="baseline", taxonomy_version=version, start=False)
    judge_run_start(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_baseline_on_the_new_version_is_cross_fitted_and_a_failed_one_offers_no_resume(
    page, live_server, login, project, manager, mast_version, screenshot
):
    traces = make_judge_traces(project, 8, words="plain") + make_judge_traces(project, 8, words="crash", start=50)
    failed = baseline(project, manager, mast_version)  # no closed round yet: nothing to train on
    closed_round(project, traces, {t.pk: {"1.1"} for t in traces[8:]} | {t.pk: {"1.2"} for t in traces[:3]})
    draft = version_draft_from(source=mast_version, by=manager)
    mode_rename(mode=draft.modes.get(code="1.2"), new_code="1.8")
    mode_split(
        mode=draft.modes.get(code="1.1"),
        into=[
            {"code": "1.1", "name": "Disobey task spec", "definition": "Ignores the task."},
            {"code": "1.7", "name": "Disobey format", "definition": "Ignores the output format."},
        ],
    )
    v2 = version_publish(version=draft)
    project.taxonomy_version = v2
    project.save()
    done = baseline(project, manager, v2)
    assert done.state == "done", done.error

    login(page, manager)
    base = f"{live_server.url}/p/{project.slug}/judge"
    page.goto(f"{base}/runs/{done.pk}/")
    expect(page.get_by_test_id("cross-fitted")).to_contain_text(CROSS_FITTED, ignore_case=True)
    expect(page.get_by_test_id("baseline-mapped")).to_contain_text("1.7 on 8 traces")
    screenshot(page, "baseline-run-cross-fitted")
    page.goto(f"{base}/runs/{done.pk}/quality/")
    expect(page.get_by_test_id("cross-fitted")).to_contain_text(CROSS_FITTED)
    screenshot(page, "baseline-quality-cross-fitted")

    page.goto(f"{base}/runs/{failed.pk}/")
    expect(page.get_by_role("heading", name="Judge run")).to_contain_text("Baseline classifier")
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)
    expect(page.get_by_test_id("resume-blocked")).to_contain_text("start a new baseline run")
    screenshot(page, "baseline-failed-no-resume")
    page.goto(f"{base}/")
    expect(page.locator("table.judge-runs tbody tr")).to_have_count(2)
    screenshot(page, "judge-runs-with-baselines")
