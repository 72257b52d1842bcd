"""A manager starts an LLM judge run from the page and watches it finish, then reads its quality."""

import pytest
from django.utils import timezone

from annotations.models import Adjudication, JudgeRun, Round, RoundTrace
from tests.annotations.conftest import make_judge_traces
from tests.llm_server import LLMServer, Reply, codes_of, good_answer

pytestmark = [pytest.mark.browser, pytest.mark.worker]


@pytest.fixture
def paced_server():
    def answer(body):
        codes = codes_of(body)
        return Reply(good_answer(codes, codes[:2], evidence=1), delay=0.4)

    server = LLMServer(default=answer).start()
    yield server
    server.stop()


def agreed(project, traces):
    rnd = Round.objects.create(
        project=project,
        name="Pilot",
        taxonomy_version=project.taxonomy_version,
        state="closed",
        closed_at=timezone.now(),
    )
    modes = list(project.taxonomy_version.modes.all())
    for i, t in enumerate(traces):
        RoundTrace.objects.create(round=rnd, trace=t, order=i)
        present = {"1.1"} if i % 2 else {"1.2", "3.3"}
        Adjudication.objects.bulk_create(
            Adjudication(
                round=rnd, trace=t, mode=m, basis="adjudicated", decision="present" if m.code in present else "absent"
            )
            for m in modes
        )


def test_manager_starts_a_run_and_watches_the_progress_bar_reach_the_end(
    page, live_server, login, manager, project, paced_server, celery_worker_process, screenshot
):
    traces = make_judge_traces(project, 12)
    agreed(project, traces[:8])
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.wait_for_selector("text=No judge run yet")
    screenshot(page, "judge-empty")
    page.click("a:has-text('New run')")
    page.check("input[name=provider][value=openai]")
    page.fill("input[name=base_url]", paced_server.url)
    page.fill("input[name=model]", "gpt-judge-test")
    page.fill("input[name=api_key_env]", "")
    page.fill("input[name=concurrency]", "3")
    screenshot(page, "judge-new-run")
    page.click("button:has-text('Start run')")
    page.wait_for_selector("#judge-progress")
    # mid-run: the bar moves (htmx polls the fragment every second)
    page.wait_for_function(
        "() => { const b = document.querySelector('#judge-progress [role=progressbar]');"
        " const v = +b.getAttribute('aria-valuenow'); return v > 0 && v < 100; }",
        timeout=30000,
    )
    screenshot(page, "judge-run-progress")
    page.wait_for_function(
        "() => document.querySelector('#judge-progress [role=progressbar]').getAttribute('aria-valuenow') === '100'",
        timeout=60000,
    )
    page.wait_for_selector("#judge-progress[data-state=done]")
    assert page.locator("[data-stat=done]").inner_text() == "12"
    run = JudgeRun.objects.get()
    assert run.state == "done" and run.n_done == 12
    screenshot(page, "judge-run-done")

    page.click("a:has-text('Judge quality')")
    page.wait_for_selector("table.judge-quality")
    assert page.locator("table.judge-quality tbody tr").count() == 15  # 14 modes + overall
    assert page.locator("text=Worst disagreements").count() == 1
    screenshot(page, "judge-quality")

    page.goto(f"{live_server.url}/p/{project.slug}/judge/")
    page.wait_for_selector("table.judge-runs")
    assert page.locator("table.judge-runs tbody tr").count() == 1
    screenshot(page, "judge-list")


def test_prompt_page_saves_a_new_version(page, live_server, login, manager, project, screenshot):
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/judge/prompt/")
    page.wait_for_selector("textarea[name=text]")
    text = page.input_value("textarea[name=text]")
    page.fill("textarea[name=text]", text + "\nAnswer conservatively.")
    page.fill("input[name=notes]", "conservative")
    page.click("button:has-text('Save as a new version')")
    page.wait_for_selector("text=Saved as prompt v2")
    screenshot(page, "judge-prompt")
