"""A whole calibration round in the real browser: the manager creates it (with the sample
preview), two annotators label blind (the workspace UI and its API), the manager starts the
review, adjudicates every disagreement on the page, closes the round, and reads the report."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotations.labels.services import rater_for_user
from annotations.models import Adjudication, Round
from annotations.rounds.selectors import round_units
from annotations.rounds.services import (
    adjudication_record,
    agreement_report_get,
    round_close,
    round_create,
    round_labels_import,
    round_open,
    round_start_review,
)
from taxonomy.services import mode_edit, version_draft_from
from tests.annotations.rounds_factories import make_traces

pytestmark = pytest.mark.browser


def _past_round(project, manager, annotators, traces, name, version, noise):
    """A finished earlier round (for the trend chart): labels imported, closed with majority."""
    rnd = round_create(
        project=project,
        name=name,
        taxonomy_version=version,
        annotators=annotators,
        trace_ids=[t.pk for t in traces],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    codes = list(version.modes.order_by("order").values_list("code", flat=True))
    for k, user in enumerate(annotators):
        labels = {}
        for i, t in enumerate(traces):
            present = {codes[(i * 3) % len(codes)], codes[(i * 5 + 1) % len(codes)]}
            if (i + k) % noise == 0:
                present.add(codes[(i + 2 * k + 4) % len(codes)])
            labels[t.pk] = {c: ("present" if c in present else "absent") for c in codes}
        round_labels_import(round=rnd, rater=rater_for_user(user=user), labels=labels)
    round_start_review(round=rnd, by=manager)
    # Two raters who differ are a tie: the adjudicator decides each one.
    decided = set(Adjudication.objects.filter(round=rnd).values_list("trace_id", "mode_id"))
    for u in round_units(round=rnd):
        if (u.trace_id, u.mode_id) not in decided:
            adjudication_record(
                round=rnd,
                trace=u.trace_id,
                mode=version.modes.get(pk=u.mode_id),
                decision="present",
                note="seen in the trace",
                by=manager,
            )
    round_close(round=rnd, by=manager)
    agreement_report_get(round=rnd)
    return rnd


def _label_via_api(page, base, slug, trace_id, round_id, present):
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    codes = page.request.get(f"{base}/api/projects/{slug}/traces/{trace_id}/annotation/?round={round_id}").json()
    revision = codes["revision"]
    labels = [
        {
            "code": c,
            "decision": "present" if c in present else "absent",
            "evidence": [{"step": 1}] if c in present else [],
            "rationale": f"saw {c} at step 1" if c in present else "",
        }
        for c in [f"{a}.{b}" for a, n in ((1, 5), (2, 6), (3, 3)) for b in range(1, n + 1)]
    ]
    headers = {"X-CSRFToken": token, "Content-Type": "application/json"}
    r = page.request.put(
        f"{base}/api/projects/{slug}/traces/{trace_id}/annotation/?round={round_id}",
        data={"revision": revision, "labels": labels},
        headers=headers,
    )
    assert r.ok, r.text()
    r = page.request.post(
        f"{base}/api/projects/{slug}/traces/{trace_id}/annotation/submit/?round={round_id}",
        data={"revision": r.json()["revision"]},
        headers=headers,
    )
    assert r.ok, r.text()


def test_a_whole_round_in_the_browser(
    transactional_db,
    live_server,
    browser,
    page,
    login,
    screenshot,
    project,
    manager,
    annotator,
    annotator2,
    mast_version,
):
    traces = make_traces(project, 8)
    # Two earlier rounds, the second on a refined taxonomy version, so the trend has a story.
    _past_round(project, manager, [annotator, annotator2], traces[:6], "Pilot", mast_version, noise=2)
    refined = version_draft_from(source=mast_version, notes="2.5 refined after the pilot")
    mode_edit(
        mode=refined.modes.get(code="2.5"),
        definition="Ignoring a peer agent's input (not a tool's).",
        note="pilot disagreements",
    )
    _past_round(project, manager, [annotator, annotator2], traces[:6], "Round 2", refined, noise=4)
    project.taxonomy_version = refined
    project.save(update_fields=["taxonomy_version"])

    base = live_server.url
    # ---- the manager creates the round, looking at the sample first
    login(page, manager)
    page.goto(f"{base}/p/demo/rounds/")
    page.get_by_role("link", name="New round").click()
    page.fill("#id_name", "Round 3")
    page.get_by_label("ann1").check()
    page.get_by_label("ann2").check()
    page.get_by_label("Random sample").check()
    page.fill("#id_n", "3")
    page.fill("#id_seed", "11")
    page.locator("#id_seed").dispatch_event("change")
    expect(page.locator("#preview")).to_contain_text("3 traces drawn at random with seed 11")
    screenshot(page, "round_create_preview")
    page.get_by_role("button", name="Create draft round").click()
    expect(page.locator("h2")).to_contain_text("Round 3")
    page.get_by_role("button", name=re.compile("Open the round")).click()
    expect(page.locator(".rd-state")).to_contain_text("Open")
    rnd = Round.objects.get(name="Round 3")
    sample = list(rnd.round_traces.order_by("order").values_list("trace_id", flat=True))

    # ---- ann1 labels the first trace in the workspace UI, the others through the API
    ctx1 = browser.new_context(viewport={"width": 1440, "height": 900})
    p1 = ctx1.new_page()
    login(p1, annotator)
    p1.goto(f"{base}/p/demo/rounds/{rnd.pk}/")
    p1.get_by_role("link", name="Label").first.click()
    p1.wait_for_selector(".ws-mode")
    for mode in p1.locator(".ws-mode").all():
        code = mode.get_attribute("data-code")
        mode.locator(f"[data-decision={'present' if code == '1.3' else 'absent'}]").click()
    expect(p1.locator("#ws-progress")).to_contain_text("14 of 14")
    p1.locator("#ws-submit").click()
    p1.wait_for_url(lambda u: f"/traces/{sample[0]}/" not in u)
    _label_via_api(p1, base, "demo", sample[1], rnd.pk, {"1.3"})
    _label_via_api(p1, base, "demo", sample[2], rnd.pk, {"1.3", "2.6"})
    # Blind: the report is closed to annotators while the round is open.
    resp = p1.goto(f"{base}/p/demo/rounds/{rnd.pk}/report/")
    assert resp.status == 403

    ctx2 = browser.new_context(viewport={"width": 1440, "height": 900})
    p2 = ctx2.new_page()
    login(p2, annotator2)
    p2.goto(f"{base}/p/demo/rounds/{rnd.pk}/")
    _label_via_api(p2, base, "demo", sample[0], rnd.pk, {"1.1"})
    _label_via_api(p2, base, "demo", sample[1], rnd.pk, {"1.3"})
    _label_via_api(p2, base, "demo", sample[2], rnd.pk, {"1.3"})
    ctx1.close()

    # ---- the manager starts the review and adjudicates on the disagreements page
    page.goto(f"{base}/p/demo/rounds/{rnd.pk}/")
    expect(page.locator(".rd-big")).to_contain_text("6")
    screenshot(page, "round_detail")
    page.get_by_role("button", name="Start review").click()
    expect(page.locator(".rd-state")).to_contain_text("Review")
    page.get_by_role("link", name="Disagreements").click()
    cards = page.locator("article.rd-dis")
    expect(cards).to_have_count(3)
    first = cards.first
    first.locator("textarea[name=body]").fill("The Planner's plan at step 1 already repeats the task.")
    first.get_by_role("button", name="Comment").click()
    expect(page.locator(".rd-comment").first).to_contain_text("already repeats")
    screenshot(page, "round_disagreements")
    decisions = {
        "1.1": ("absent", "Task spec is followed; ann2 misread the constraint."),
        "1.3": ("present", "Step 2 repeats step 1 verbatim."),
        "2.6": ("absent", "The action matches the stated reasoning."),
    }
    for _ in range(3):
        card = page.locator("article.rd-dis:not(.rd-dis-decided)").first
        code = card.locator(".mode-code").first.inner_text().strip()
        decision, note = decisions[code]
        card.locator(f"input[name=decision][value={decision}]").check()
        card.locator("textarea[name=note]").fill(note)
        card.get_by_role("button", name="Record decision").click()
        expect(page.locator(f"article.rd-dis-decided:has-text('{note}')")).to_have_count(1)
    screenshot(page, "round_disagreements_decided")
    assert Adjudication.objects.filter(round=rnd, basis="adjudicated").count() == 3

    # ann2 may now read ann1's rationale (reveal_in_review is on by default)
    p2.goto(f"{base}/p/demo/rounds/{rnd.pk}/disagreements/?status=all")
    expect(p2.locator("body")).to_contain_text("saw 2.6 at step 1")
    ctx2.close()

    # ---- close, then the report
    page.goto(f"{base}/p/demo/rounds/{rnd.pk}/")
    page.get_by_role("button", name="Close the round").click()
    expect(page.locator(".rd-state")).to_contain_text("Closed")
    page.get_by_role("link", name="Agreement report").click()
    expect(page.locator(".rd-heat")).to_be_visible()
    expect(page.locator(".rd-modes").first).to_contain_text("undefined")
    expect(page.locator(".rd-trend .rd-point")).to_have_count(3)
    expect(page.locator(".rd-version-text")).to_contain_text("new taxonomy")
    screenshot(page, "round_report")
    page.goto(f"{base}/p/demo/rounds/")
    screenshot(page, "round_list")
