"""A trace with one 40 MB line (a tool that printed a whole dataset on one line) in Chromium: the
page becomes ready, the line is shown a piece at a time (escaped), its end is reachable and search
finds a word at its end."""

import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from traces.importing.service import traces_import
from traces.models import Trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MB = 1024 * 1024
LAST = "zebraquartz"


def long_line_trace(project, mb: int = 40) -> Trace:
    words = "lorem ipsum dolor <b>sit</b> amet " * (mb * MB // 34)
    messages = [
        {"role": "user", "content": "Count the rows of the dataset."},
        {"role": "tool", "content": words + LAST},
        {"role": "assistant", "content": "The dataset has 1.2 million rows."},
    ]
    upload = SimpleUploadedFile("long_line.json", json.dumps(messages).encode())
    result = traces_import(project=project, paths_or_files=[upload])
    return Trace.objects.get(pk=result.trace_ids[0])


LINE_TEXT = "document.querySelector('#step-1 .tv-line:nth-child(2) .tv-tx').textContent"


def test_a_40_mb_line_renders_in_pieces_and_search_reaches_its_end(
    page, live_server, login, viewer, project, screenshot
):
    trace = long_line_trace(project)
    login(page, viewer)
    page.set_default_timeout(60000)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    started = time.monotonic()
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    print(f"40 MB line: trace page ready in {time.monotonic() - started:.2f} s (test server, not a benchmark)")
    row = page.locator("#step-1 .tv-line").nth(1)
    assert len(row.locator(".tv-tx").inner_text()) <= 20000
    assert "characters 1\u201320,000 of" in row.locator(".tv-long").inner_text()
    screenshot(page, "long-line-first-piece")

    row.locator(".tv-long-go[data-to='end']").click()
    page.wait_for_function(f"() => {LINE_TEXT}.endsWith('{LAST}')")
    assert "<b>sit</b>" in row.locator(".tv-tx").inner_text()  # shown as text, never as markup
    assert page.locator("#step-1 b").count() == 0

    row.locator(".tv-long-go[data-to='prev']").click()  # back one piece
    page.wait_for_function(f"() => !{LINE_TEXT}.endsWith('{LAST}')")

    page.fill(".tv-search-input", LAST)
    page.keyboard.press("Enter")
    mark = page.locator("mark.tv-hit.is-current")
    mark.wait_for()
    assert mark.inner_text() == LAST
    assert row.locator(".tv-tx").inner_text().endswith(LAST)
    screenshot(page, "long-line-search-at-end")
    assert errors == []
