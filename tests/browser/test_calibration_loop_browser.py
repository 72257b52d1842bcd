"""The calibration loop in the real browser, as a manager walks it: round 1 on v1 is closed; revise
1.5 on its page, publish the draft and take the offer to make it the working version, create round
2 on v2 with the form and open it; annotators label (through the services, as the round-flow test
covers the workspace itself), the manager starts the review and closes the round on its page; then
the dashboard counts both rounds' traces under v2, the release card says what was mapped, the
trend chart shows both rounds, and the project home says where the work stands."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotations.labels.services import rater_for_user
from annotations.models import Release, Round
from annotations.releases.services import release_build, release_create
from annotations.rounds.services import round_close, round_labels_import
from taxonomy.models import TaxonomyVersion
from tests.annotations.rounds_factories import codes, make_review_round, make_traces

pytestmark = pytest.mark.browser


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def test_the_loop_across_two_versions(
    page, login, live_server, project, manager, annotator, annotator2, mast_version, screenshot, media
):
    t1, t2 = make_traces(project, 5), make_traces(project, 5)
    r1 = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=t1, name="Round 1")
    round_close(round=r1, by=manager)
    base = live_server.url
    page.set_default_timeout(60000)  # a loaded shared machine; the steps are few
    login(page, manager)

    # revise 1.5 from round 1
    page.goto(f"{base}/p/{project.slug}/rounds/{r1.pk}/revise/1.5/")
    page.fill("textarea[name=definition]", "Stops before the task's stated end condition is met, or never stops.")
    page.click("button:has-text('Save in the draft version')")
    expect(page.locator(".message").first).to_contain_text("revised in draft MAST v2")

    # publish the draft, then take the offer
    v2 = TaxonomyVersion.objects.get(taxonomy=mast_version.taxonomy, number=2)
    page.goto(f"{base}/taxonomies/{v2.taxonomy.slug}/v2/")
    page.click("button:has-text('Publish')")
    offers = page.get_by_test_id("working-version-offers")
    expect(offers).to_be_visible()
    screenshot(page, "loop-publish-offer")
    offers.get_by_role("button", name=re.compile("Make MAST v2 the working version")).click()
    expect(page.locator(".message").first).to_contain_text("now works on MAST v2")

    # round 2 on v2, with the form
    page.goto(f"{base}/p/{project.slug}/rounds/new/")
    page.fill("input[name=name]", "Round 2")
    page.select_option("select[name=taxonomy_version]", str(v2.pk))
    page.check(f"input[name=annotators][value='{annotator.pk}']")
    page.check(f"input[name=annotators][value='{annotator2.pk}']")
    page.check("input[name=method][value=manual]")
    page.fill("input[name=trace_ids]", " ".join(str(t.pk) for t in t2))
    page.click("button:has-text('Create draft round')")
    page.click("button:has-text('Open the round')")
    r2 = Round.objects.get(project=project, name="Round 2")
    assert r2.taxonomy_version == v2 and r2.state == "open"
    for user in (annotator, annotator2):
        labels = {t.pk: {c: ("present" if c == "1.5" else "absent") for c in codes(v2)} for t in t2}
        round_labels_import(round=r2, rater=rater_for_user(user=user), labels=labels)
    page.reload()
    page.click("button:has-text('Start review')")
    page.click("button:has-text('Close the round')")
    expect(page.locator(".rd-state-closed").first).to_be_visible()

    # every reader on v2, round 1 mapped
    page.goto(f"{base}/p/{project.slug}/analytics/")
    expect(page.get_by_test_id("n-traces")).to_have_text("10")
    expect(page.get_by_test_id("target-version")).to_have_value(str(v2.pk))
    expect(page.get_by_test_id("mapping-counts")).to_contain_text("70 of 70 from MAST v1")
    screenshot(page, "loop-dashboard-v2")

    project.refresh_from_db()  # the working version moved in the browser
    release = release_create(project=project, by=manager, enqueue=False)
    release_build(release_id=release.pk)
    assert Release.objects.get(pk=release.pk).n_traces == 10
    page.goto(f"{base}/p/{project.slug}/releases/")
    expect(page.get_by_test_id("release-mapping").first).to_contain_text("70 of 70 mapped from MAST v1")

    page.goto(f"{base}/p/{project.slug}/rounds/")
    trend = page.get_by_test_id("trend-own")
    expect(trend.locator(".rd-point")).to_have_count(2)
    expect(trend.locator(".rd-version-line")).to_have_count(1)
    expect(trend.get_by_test_id("trend-revisions")).to_contain_text("1.5")
    # legible: no two axis labels or version tags overlap
    boxes = [trend.locator(".rd-xlabel").nth(i).bounding_box() for i in range(2)]
    assert boxes[0]["x"] + boxes[0]["width"] < boxes[1]["x"]
    screenshot(page, "loop-trend")

    page.goto(f"{base}/p/{project.slug}/")
    expect(page.get_by_test_id("status-working-version")).to_have_text("MAST v2")
    expect(page.get_by_test_id("next-step")).to_contain_text("No LLM judge run on MAST v2 yet")
    screenshot(page, "loop-home")
