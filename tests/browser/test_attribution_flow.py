"""Failure attribution in the real browser: an annotator marks the decisive step with one key and
submits; the manager adjudicates the attribution disagreement on the page; the release carries it."""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Annotation, AttributionDecision, Release
from annotations.releases.services import release_build, release_create
from annotations.rounds.services import round_close, round_create, round_open, round_start_review
from tests.annotations.workspace_factories import make_trace

pytestmark = pytest.mark.browser

AGENTS = ("Planner", "Coder", "Reviewer")


def test_mark_decisive_step_by_keyboard_adjudicate_and_find_it_in_the_release(
    page, live_server, login, project, manager, annotator, annotator2, screenshot, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    trace = make_trace(project, n_steps=12, lines_per_step=3, title="Who broke the build", agents=AGENTS)
    rnd = round_create(
        project=project,
        name="Attribution check",
        taxonomy_version=project.taxonomy_version,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[trace.pk],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    codes = list(project.taxonomy_version.modes.order_by("order", "code").values_list("code", flat=True))
    # ann2 blames the Planner at step 6 (through the service, as her own browser would).
    other = annotation_get_or_create(trace=trace, user=annotator2, taxonomy_version=rnd.taxonomy_version, round=rnd)
    other = annotation_save(
        annotation=other,
        by=annotator2,
        base_revision=0,
        labels=[{"code": c, "decision": "absent"} for c in codes],
        attribution={"step": 6, "reason": "the plan drops the tests"},
    )
    annotation_submit(annotation=other, by=annotator2, base_revision=other.revision)

    # ann1, keyboard only: j j -> step 2 (the first j moves on from step 0), m marks it decisive,
    # then every mode absent, Ctrl+Enter.
    page.set_default_timeout(45000)  # the shared machine is loaded (load average ~11 while written)
    login(page, annotator)
    page.goto(f"{live_server.url}/p/{project.slug}/traces/{trace.pk}/label/?round={rnd.pk}")
    page.wait_for_selector("#ws[data-ready='1']")
    page.wait_for_selector(".trace-viewer[data-ready='1']")
    kb = page.keyboard
    for _ in range(2):
        kb.press("j")
    kb.press("m")
    page.wait_for_selector(".tv-step[data-step='2'] .tv-mark:text('decisive')")
    assert page.locator(".tv-outline-mark[data-step='2']").count() == 1
    assert "Decisive step #2" in page.locator("#ws-attr-summary").inner_text()
    assert page.locator("#ws-attr-agent").input_value() == "Reviewer"  # taken from the step
    for i in range(len(codes)):
        if i:
            kb.press("ArrowDown")
        kb.press("x")
    page.wait_for_function("() => document.getElementById('ws-status').dataset.state === 'saved'", timeout=10000)
    page.locator("#ws-attr").scroll_into_view_if_needed()
    screenshot(page, "attribution-workspace", full_page=False)
    page.screenshot(path="/tmp/shots-attrib/workspace.png")
    kb.press("Control+Enter")
    for _ in range(50):  # Submit & next: wait until the submission is stored
        if Annotation.objects.filter(trace=trace, rater__user=annotator, round=rnd, state="submitted").exists():
            break
        page.wait_for_timeout(200)
    mine = Annotation.objects.select_related("attribution").get(trace=trace, rater__user=annotator, round=rnd)
    assert mine.state == "submitted"
    assert (mine.attribution.decisive_step, mine.attribution.agent) == (2, "Reviewer")

    # The manager adjudicates on the disagreements page: ann1's answer, with a note.
    round_start_review(round=rnd, by=manager)
    browser = page.context.browser
    page.context.close()  # the workspace's page keeps a request open; the manager gets a browser of her own
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.set_default_timeout(45000)
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/{rnd.pk}/disagreements/?status=all")
    card = page.locator(f"#attr-{trace.pk}")
    assert "step 2 · Reviewer" in card.inner_text() and "step 6 · Planner" in card.inner_text()
    card.locator("input[name=choice][value='rater:0']").check()
    card.locator("textarea[name=note]").fill("The Reviewer approved the broken code at step 2.")
    card.get_by_role("button", name="Record decision").click()
    page.wait_for_selector(f"#attr-{trace.pk} .badge-ok:text('adjudicated')")
    page.screenshot(path="/tmp/shots-attrib/disagreements.png", full_page=True)
    screenshot(page, "attribution-disagreements")
    decision = AttributionDecision.objects.get(round=rnd, trace=trace)
    assert (decision.decisive_step, decision.agent, decision.basis) == (2, "Reviewer", "adjudicated")

    # Closed, released: the release file the manager downloads carries the agreed attribution.
    round_close(round=rnd, by=manager)
    release = release_create(project=project, by=manager, options={"formats": ["jsonl"]}, enqueue=False)
    release = release_build(release_id=release.pk)
    assert release.status == Release.Status.DONE, release.error
    name = release.files.get(kind="jsonl").name
    body = page.request.get(f"{live_server.url}/p/{project.slug}/releases/{release.number}/files/{name}").text()
    records = [json.loads(line) for line in body.splitlines() if line.strip()]
    (record,) = [r for r in records if r["mast_studio"]["trace_pk"] == trace.pk]
    attribution = record["mast_studio"]["attribution"]
    assert (attribution["step_index"], attribution["agent"], attribution["basis"]) == (2, "Reviewer", "adjudicated")
    assert attribution["step_id"] == trace.steps.get(index=2).pk
    assert django_settings.MEDIA_ROOT == settings.MEDIA_ROOT
