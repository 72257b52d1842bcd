"""Whom a step addresses (Step.recipient), from import to the API and the trace page in Chromium."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from traces.importing.service import traces_import
from traces.models import Step, Trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'


def _whowhen(project, addressee: str) -> Trace:
    record = {
        "question": "How many stops?",
        "history": [
            {"role": "human", "content": "How many stops?"},
            {"role": f"Orchestrator (-> {addressee})", "content": "Open the line's timetable."},
            {"role": "WebSurfer", "content": "The line has 12 stops."},
        ],
    }
    upload = SimpleUploadedFile("whowhen.json", json.dumps(record).encode())
    result = traces_import(project=project, paths_or_files=[upload])
    return Trace.objects.get(pk=result.trace_ids[0])


def test_the_recipient_is_stored_returned_by_the_api_and_shown_escaped(
    page, live_server, login, viewer, client, project, screenshot
):
    trace = _whowhen(project, "WebSurfer")
    hostile = _whowhen(project, XSS)
    assert list(Step.objects.filter(trace=trace).order_by("index").values_list("agent", "recipient")) == [
        ("human", ""), ("Orchestrator", "WebSurfer"), ("WebSurfer", ""),
    ]  # fmt: skip
    client.force_login(viewer)
    steps = client.get(f"/api/projects/{project.slug}/traces/{trace.pk}/steps/").json()
    rows = steps["results"] if isinstance(steps, dict) and "results" in steps else steps["steps"]
    assert [s["recipient"] for s in rows] == ["", "WebSurfer", ""]

    login(page, viewer)
    page.set_default_timeout(45000)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    assert page.inner_text("#step-1 .tv-recipient") == "\u2192 WebSurfer"
    assert page.locator("#step-0 .tv-recipient").count() == 0
    screenshot(page, "step-recipient")

    page.goto(f"{live_server.url}/p/{project.slug}/traces/{hostile.pk}/")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    assert page.inner_text("#step-1 .tv-recipient") == f"\u2192 {XSS}"
    assert page.evaluate("() => window.__xss") is None and errors == []
