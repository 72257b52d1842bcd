"""The round report with six raters: the pair matrix is not clipped, and the mode x rater view
shows each rater's prevalence and kappa per mode."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.labels.services import rater_for_user
from annotations.rounds.services import round_create, round_labels_import, round_open, round_start_review
from tests.annotations.rounds_factories import codes, make_traces
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.browser


def _six_rater_round(project, manager, n_traces=20):
    users = []
    for name in ("alice", "bob", "carol", "dmitri", "eve", "farah"):
        user = UserFactory(username=name)
        MembershipFactory(project=project, user=user, role="annotator")
        users.append(user)
    traces = make_traces(project, n_traces)
    version = project.taxonomy_version
    rnd = round_create(
        project=project, name="Six raters", taxonomy_version=version, annotators=users,
        trace_ids=[t.pk for t in traces], by=manager,
    )  # fmt: skip
    round_open(round=rnd, by=manager)
    all_codes = codes(version)
    for k, user in enumerate(users):
        labels = {}
        for i, t in enumerate(traces):
            present = {all_codes[i % 14], all_codes[(i * 3 + 1) % 14]}
            if (i + k) % 4 == 0:
                present.add(all_codes[(i + k) % 14])
            labels[t.pk] = {c: ("present" if c in present else "absent") for c in all_codes}
        round_labels_import(round=rnd, rater=rater_for_user(user=user), labels=labels)
    return round_start_review(round=rnd, by=manager)


@pytest.mark.parametrize("size", [(1440, 900), (1280, 720)])
def test_six_rater_matrix_is_not_clipped(
    transactional_db, live_server, browser, login, project, manager, screenshot, size
):
    rnd = _six_rater_round(project, manager)
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(20000)
    login(page, manager)
    page.goto(f"{live_server.url}/p/{project.slug}/rounds/{rnd.pk}/report/")
    expect(page.locator(".rd-heat tbody tr")).to_have_count(6)
    wrap = page.locator(".rd-heat-wrap")
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "the pair matrix scrolls sideways (clipped)"
    view = page.locator("[data-testid=mode-rater]")
    expect(view.locator("th.rd-mr-rater")).to_have_count(6)
    expect(view.locator("tbody tr")).to_have_count(14)
    assert view.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
    first = view.locator("tbody tr").first
    assert first.locator("td.rd-mr-prev").first.inner_text().endswith("%")
    screenshot(page, f"round_report_six_raters_{size[0]}x{size[1]}")
    context.close()
