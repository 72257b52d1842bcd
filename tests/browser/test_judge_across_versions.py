"""The judge across the calibration loop, as a manager lives it: judges run on MAST v1, a definition
is revised after the round, the next round opens on the new version (the project moves to it), and
Compare judges still measures every earlier judge run, naming the version of each number; a
baseline started on the new version trains on the agreed labels carried onto it and says its
scores are cross-fitted."""

import pytest

from annotations.judge.runs import judge_run_create
from annotations.models import JudgeRun
from annotations.rounds.services import round_create, round_open, round_revise_definition
from tests.annotations.conftest import drive, make_judge_traces
from tests.annotations.judge.test_judge_web import closed_round
from tests.llm_server import LLMServer

pytestmark = [pytest.mark.browser, pytest.mark.worker]


@pytest.fixture
def server():
    s = LLMServer().start()
    yield s
    s.stop()


def test_earlier_judges_keep_their_numbers_after_the_project_moves_to_a_revised_version(
    page,
    live_server,
    login,
    manager,
    annotator,
    annotator2,
    project,
    server,
    celery_worker_process,
    screenshot,
    settings,
):
    settings.MAST_JUDGE_BACKOFF_BASE = 0.05
    v1 = project.taxonomy_version
    traces = make_judge_traces(project, 12, words="the verifier approved without running tests")
    pilot = closed_round(
        project,
        traces,
        {t.pk: ({"1.1", "3.2"} if i % 3 == 0 else {"3.2"} if i % 3 == 1 else set()) for i, t in enumerate(traces)},
        name="Pilot",
    )
    runs = [
        drive(judge_run_create(project=project, by=manager, provider=p, base_url=server.url, model="o1", start=False))
        for p in ("openai", "mast")
    ]
    assert all(r.state == "done" for r in runs), [r.error for r in runs]
    # revise 3.2 after the round, open the next round on the draft (publishing it, moving the project)
    revised = round_revise_definition(
        round=pilot, mode_code="3.2", definition="Verification that does not run the checks it claims.", by=manager
    )
    v2 = revised.version
    nxt = round_create(
        project=project,
        name="Round 2",
        taxonomy_version=v2,
        annotators=[annotator, annotator2],
        trace_ids=[t.pk for t in traces[:4]],
        make_working_version=True,
        by=manager,
    )
    round_open(round=nxt, by=manager)
    project.refresh_from_db()
    assert project.taxonomy_version == v2 and v2 != v1

    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/compare/")
    for r in runs:
        page.check(f"input[name=s][value='run:{r.pk}']")
    page.click("button:has-text('Compare')")
    for v in (v1, v2):
        section = page.locator(f"section[data-version='{v.pk}']")
        section.wait_for()
        assert f"On {v.label}" in section.locator("h2").inner_text()
        for r in runs:
            row = section.locator(f".compare-pooled tr[data-rater='run:{r.pk}']")
            assert row.count() == 1, f"run {r.pk} missing on {v.label}"
            accuracy = row.locator("td[data-stat=accuracy]").inner_text().split("\n")[0].strip()
            assert accuracy not in ("", "–"), f"run {r.pk} on {v.label}: {accuracy!r}"
            assert f"Run #{r.pk}" in row.inner_text() and v1.label in row.inner_text()
    on_v2 = page.locator(f"section[data-version='{v2.pk}']")
    assert "working version" in on_v2.locator("h2").inner_text()
    assert "through the mapping from" in on_v2.locator(".compare-pooled").inner_text()
    screenshot(page, "judge-compare-across-versions")

    # a baseline on the new version trains on the labels carried onto it, with honest scores
    page.goto(f"{live_server.url}/p/{project.slug}/judge/new/")
    page.check("input[name=provider][value=baseline]")
    page.click("button:has-text('Start run')")
    page.wait_for_selector("#judge-progress[data-state=done]", timeout=60000)
    baseline = JudgeRun.objects.get(provider="baseline")
    assert baseline.taxonomy_version == v2 and baseline.state == "done", baseline.error
    page.reload()  # the run page, as it reads once the run is done
    assert "cross-fitted: each trace was predicted by a model that did not see it" in page.locator("main").inner_text()
    screenshot(page, "judge-baseline-cross-fitted")
