"""A manager uploads a trace on the import page, watches the progress bar finish, opens the trace."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_manager_uploads_watches_progress_and_opens_the_trace(
    celery_worker_process, live_server, page, login, screenshot, project, manager, demo_data
):
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    page.set_input_files(
        "input[name=files]",
        [str(demo_data / "appworld" / "demo_5e1f0aa_1.txt"), str(demo_data / "openmanus" / "demo_openmanus.log")],
    )
    screenshot(page, "import-page")
    page.click(".import-form button[type=submit]")

    page.wait_for_url(re.compile(r"/import/\d+/$"))
    page.wait_for_selector("#import-job[data-status=done]", timeout=60000)
    assert page.inner_text(".import-percent") == "100%"
    assert page.inner_text("[data-figure=imported]") == "2"
    assert page.inner_text("[data-figure=duplicates]") == "0"
    screenshot(page, "import-result")

    page.click(".import-traces a:has-text('demo_5e1f0aa_1.txt')")
    page.wait_for_url(re.compile(rf"/p/{project.slug}/traces/\d+/$"))
    assert "Road Trip" in page.content()
    screenshot(page, "import-opened-trace")

    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    assert page.inner_text(".import-jobs tbody tr:first-child td:nth-child(5)") == "done"
    screenshot(page, "import-page-with-jobs")


def test_a_bad_file_shows_the_exact_error_on_the_result_page(
    celery_worker_process, live_server, page, login, screenshot, project, manager, tmp_path
):
    bad = tmp_path / "broken.json"
    bad.write_text('[\n{"role": "user", "content": "a"},\n{"role": "user" "content": "b"}\n]')
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    page.set_input_files("input[name=files]", str(bad))
    page.click(".import-form button[type=submit]")

    page.wait_for_selector("#import-job[data-status=failed]", timeout=60000)
    assert "broken.json, line 3: invalid JSON" in page.inner_text(".import-error-text")
    assert page.inner_text("[data-figure=imported]") == "0"
    screenshot(page, "import-failed")


def test_the_job_page_polls_the_progress_bar_until_the_job_ends(
    live_server, page, login, screenshot, project, manager, settings, tmp_path
):
    from traces.importing.jobs import _write_progress
    from traces.importing.results import ImportProgress
    from traces.models import ImportJob

    settings.MEDIA_ROOT = tmp_path  # where the job's progress file lives
    job = ImportJob.objects.create(
        project=project, created_by=manager, status="running", bytes_total=200_000_000, file_names=["MAD_full.json"]
    )
    _write_progress(job.pk, ImportProgress(bytes_done=80_000_000, bytes_total=200_000_000, imported=657, duplicates=3))
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/import/{job.pk}/")

    assert page.inner_text(".import-percent") == "40%"
    assert page.get_attribute(".import-bar", "aria-valuenow") == "40"
    assert "657 traces so far" in page.inner_text(".import-figures")
    screenshot(page, "import-running")

    ImportJob.objects.filter(pk=job.pk).update(status="done", n_imported=1639, n_duplicates=3, bytes_done=200_000_000)
    page.wait_for_selector("#import-job[data-status=done]", timeout=5000)  # the next 500 ms poll
    assert page.inner_text("[data-figure=imported]") == "1,639"


def test_a_mixed_batch_shows_one_line_per_file_with_what_it_became(
    celery_worker_process, live_server, page, login, screenshot, project, manager, demo_data, import_fixtures
):
    run = demo_data / "chatdev" / "Weather_CLI_DemoOrg_20261130090000"
    chatdev = [
        str(run / "Weather_CLI_DemoOrg_20261130090000.log"),
        str(run / "Weather_CLI.prompt"),
        str(run / "meta.txt"),
    ]
    good = [
        *chatdev,
        str(import_fixtures / "claude_session.jsonl"),
        str(import_fixtures / "autogen_taskresult.json"),
        str(import_fixtures / "otlp_genai.jsonl"),
    ]
    from traces.parsers import formats

    (otlp,) = [f for f in formats() if f.name == "otlp"]
    with open(import_fixtures / "otlp_genai.jsonl", "rb") as f:
        n_otlp_traces = sum(1 for _ in otlp.read(f, filename="otlp_genai.jsonl"))
    login(page, manager)

    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    page.set_input_files("input[name=files]", [*good, str(import_fixtures / "not_objects.json")])
    page.click(".import-form button[type=submit]")
    page.wait_for_selector("#import-job[data-status=failed]", timeout=60000)
    rows = page.locator("[data-testid=import-files] tbody tr")
    assert rows.count() == 7  # one line per file, none dropped
    lines = {rows.nth(i).locator(".file-name").inner_text(): rows.nth(i) for i in range(7)}
    assert lines["not_objects.json"].get_attribute("data-status") == "refused"
    assert "record 1: record is null, expected an object" in lines["not_objects.json"].inner_text()
    assert lines["claude_session.jsonl"].get_attribute("data-status") == "not stored"
    assert lines["meta.txt"].get_attribute("data-status") == "companion"
    assert page.inner_text("[data-figure=failed]") == "1"
    screenshot(page, "import-mixed-refused")

    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    page.set_input_files("input[name=files]", good)
    page.click(".import-form button[type=submit]")
    page.wait_for_selector("#import-job[data-status=done]", timeout=60000)
    rows = page.locator("[data-testid=import-files] tbody tr")
    assert rows.count() == 6
    text = {rows.nth(i).locator(".file-name").inner_text(): rows.nth(i).inner_text() for i in range(6)}
    assert "Claude session JSONL" in text["claude_session.jsonl"] and "test-finder" in text["claude_session.jsonl"]
    assert (
        "AutoGen TaskResult" in text["autogen_taskresult.json"]
        and "DataAnalystAgent" in text["autogen_taskresult.json"]
    )
    assert "ChatDev log" in text["Weather_CLI_DemoOrg_20261130090000.log"]
    assert "ChatDev task prompt" in text["Weather_CLI.prompt"]
    assert "OTLP/JSON spans" in text["otlp_genai.jsonl"]
    assert page.inner_text("[data-figure=imported]") == str(3 + n_otlp_traces)
    screenshot(page, "import-mixed-done")


def test_the_report_table_of_a_finished_import_reads_well(
    live_server, page, login, screenshot, project, manager, settings, tmp_path, demo_data, import_fixtures
):
    """The job page of imports run in this process (no worker): the per-file table, done and refused."""
    from traces.importing.jobs import import_job_create, import_job_run

    settings.MEDIA_ROOT = tmp_path
    run = demo_data / "chatdev" / "Weather_CLI_DemoOrg_20261130090000"
    names = ["claude_session.jsonl", "autogen_taskresult.json", "smolagents_memory.json", "docent_agent_runs.json"]
    batches = [
        [*sorted(run.iterdir()), *(import_fixtures / n for n in names)],
        [import_fixtures / names[0], import_fixtures / "not_json.json"],
    ]
    jobs = []
    for paths in batches:
        files = [open(p, "rb") for p in paths]  # noqa: SIM115
        job = import_job_create(project=project, by=manager, files=files)
        for f in files:
            f.close()
        jobs.append(import_job_run(job_id=job.pk))
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/import/{jobs[0].pk}/")
    assert page.locator("[data-testid=import-files] tbody tr").count() == 7
    assert page.inner_text("[data-figure=imported]") == "5"
    screenshot(page, "import-report-done")
    page.goto(f"{live_server.url}/p/{project.slug}/import/{jobs[1].pk}/")
    assert "line 1: invalid JSON" in page.inner_text("tr[data-status=refused]")
    assert page.locator("tr[data-status='not stored']").count() == 1
    screenshot(page, "import-report-refused")


def test_the_import_the_rest_checkbox_keeps_the_good_records_and_lists_the_broken_lines(
    celery_worker_process, live_server, page, login, screenshot, project, manager, tmp_path
):
    from tests.traces.importing.test_import_rest import CUT

    cut = tmp_path / "run.jsonl"
    cut.write_text(CUT)
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/import/")
    page.set_input_files("input[name=files]", str(cut))
    page.check("#import-rest")
    screenshot(page, "import-rest-checked")
    page.click(".import-form button[type=submit]")

    page.wait_for_selector("#import-job[data-status=done]", timeout=60000)
    assert page.inner_text("[data-figure=imported]") == "2"
    broken = page.inner_text("[data-testid=broken-lines]")
    assert "2 broken lines skipped" in broken
    assert "line 2: invalid JSON" in broken and "line 4: invalid JSON" in broken
    screenshot(page, "import-rest-report")
