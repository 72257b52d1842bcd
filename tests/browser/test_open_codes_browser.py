"""In Chromium: a manager finds an open code on the Open codes tab, reads its uses and promotes it
to a failure mode in the next version's draft; the agreed-labels page and a split in the mapping
editor, screenshotted at 1440x900."""

from __future__ import annotations

import pytest

from annotations.labels.services import annotation_get_or_create, annotation_save
from annotations.models import OpenCode
from taxonomy.models import FailureMode, ModeMapping
from tests.annotations.workspace_factories import make_trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tag(user, trace, names, rationale):
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=trace.project.taxonomy_version)
    annotation_save(
        annotation=ann,
        by=user,
        base_revision=0,
        labels=[{"code": "1.3", "decision": "present", "evidence": [{"step": 2}], "rationale": rationale}],
        open_codes=names,
    )


def test_manager_promotes_an_open_code_to_a_failure_mode(
    page, live_server, login, project, manager, annotator, annotator2, screenshot
):
    t1, t2 = make_trace(project, title="ChatDev run"), make_trace(project, title="OpenManus run")
    tag(annotator, t1, ["hits step limit", "retry loop"], "Stops only when the step budget runs out.")
    tag(annotator2, t2, ["hits step limit"], "<b>no result</b> before the limit")
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/traces/")
    page.get_by_role("link", name="Open codes").click()
    row = page.locator("tr[data-code='hits step limit']")
    assert row.locator("td").nth(1).inner_text() == "2"
    assert "ann1, ann2" in row.inner_text() and "1.3" in row.inner_text()
    screenshot(page, "open-codes-list")
    row.get_by_role("link", name="hits step limit").click()
    screenshot(page, "open-code-detail")
    assert page.locator("article.oc-use").count() == 2
    assert page.locator(".oc-use b", has_text="no result").count() == 0  # trace content and rationales are escaped
    assert (
        "<b>no result</b>" in page.locator(".oc-use").nth(0).inner_text() + page.locator(".oc-use").nth(1).inner_text()
    )
    screenshot(page, "open-code-detail")
    page.get_by_role("link", name="Promote to a failure mode").click()
    examples = page.locator("textarea[name=examples]").input_value()
    assert "Stops only when the step budget runs out." in examples and "step 2" in examples
    assert page.locator("input[name=mode_code]").input_value() == "1.6"
    page.fill("textarea[name=definition]", "The run ends at an external step limit without a result.")
    page.fill("input[name=name]", "Step budget exhausted")
    screenshot(page, "open-code-promote")
    page.locator("[data-testid=promote-form] button[type=submit]").click()
    page.wait_for_selector("[data-testid=promoted]")
    assert "1.6 Step budget exhausted in MAST v2 (draft)" in page.locator("[data-testid=promoted]").inner_text()
    screenshot(page, "open-code-promoted")
    mode = FailureMode.objects.get(code="1.6", version__status="draft")
    assert OpenCode.objects.get(name="hits step limit").promoted_mode == mode
    assert ModeMapping.objects.get(version=mode.version, new_code="1.6").kind == "add"
    page.get_by_role("link", name="Open codes").first.click()
    assert "1.6 in MAST v2 (draft)" in page.locator("tr[data-code='hits step limit']").inner_text()
