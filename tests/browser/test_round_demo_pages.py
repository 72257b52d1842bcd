"""The demo's rounds as people see them: the pilot's report (three raters), Round 2's
disagreements in review, and what an annotator sees of a round (screenshots looked at)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.demo import seed_users_and_project
from annotations.models import Round
from annotations.rounds.demo import seed

pytestmark = pytest.mark.browser


@pytest.fixture
def demo(transactional_db, password):
    from traces.importing.demo import seed as seed_traces

    ctx = seed_users_and_project()
    for user in ctx.users.values():
        user.set_password(password)
        user.save()
    seed_traces(ctx)
    seed(ctx)
    return ctx


def test_demo_round_pages(demo, live_server, page, login, screenshot):
    pilot = Round.objects.get(name="Pilot round")
    second = Round.objects.get(name="Round 2")
    login(page, demo.users["manager"])
    page.goto(f"{live_server.url}/p/demo/rounds/{pilot.pk}/report/")
    expect(page.locator(".rd-heat tbody tr")).to_have_count(3)
    screenshot(page, "round_demo_report")
    page.goto(f"{live_server.url}/p/demo/rounds/{second.pk}/disagreements/")
    expect(page.locator("article.rd-dis").first).to_be_visible()
    screenshot(page, "round_demo_disagreements")


def test_annotator_sees_round_in_review_with_labels_revealed(demo, live_server, page, login, screenshot):
    second = Round.objects.get(name="Round 2")
    login(page, demo.users["carol"])
    page.goto(f"{live_server.url}/p/demo/rounds/")
    expect(page.locator(".rd-list")).to_contain_text("yours")
    page.goto(f"{live_server.url}/p/demo/rounds/{second.pk}/disagreements/?status=all")
    expect(page.locator("body")).to_contain_text("Ignores the WebSurfer.")
    expect(page.locator("textarea[name=note]")).to_have_count(0)  # no adjudication form for annotators
    screenshot(page, "round_demo_disagreements_annotator")
