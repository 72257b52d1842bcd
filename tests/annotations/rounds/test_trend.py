"""The agreement trend on Rounds: failure-mode kappa and attribution agreement as two series, points
named by the rounds in the order they were opened, a round in review shown as provisional, and
nothing from a round the reader may not see the report of (an open round is blind)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Round
from annotations.rounds.report import trend_chart
from annotations.rounds.selectors import round_kappa_trend
from annotations.rounds.services import (
    adjudication_record,
    round_close,
    round_create,
    round_open,
    round_start_review,
)
from tests.annotations.rounds_factories import codes, label_via_workspace, make_review_round, make_traces

# trace index -> (decisive step, agent): both annotators of the attribution round say the same
ATTRIBUTIONS = {0: (1, "Coder"), 1: (0, "Planner"), 2: (2, "Reviewer")}


def _attribute(rnd, user, trace, answer):
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=rnd.taxonomy_version, round=rnd)
    labels = [{"code": c, "decision": "present" if c == "1.1" else "absent"} for c in codes(rnd.taxonomy_version)]
    attribution = {"step": answer[0], "agent": answer[1], "modes": ["1.1"], "reason": "scripted"}
    ann = annotation_save(annotation=ann, by=user, base_revision=ann.revision, labels=labels, attribution=attribution)
    annotation_submit(annotation=ann, by=user, base_revision=ann.revision)


@pytest.fixture
def story(project, manager, annotator, annotator2):
    """Opened in this order: "Pilot" (failure modes), "Who&When" (attribution), "Refined" (failure
    modes, in review). Closed in another: Who&When before Pilot."""
    traces = make_traces(project, 4)
    pilot = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces,
        disagree_on=traces[:1],
        name="Pilot",
    )
    who = round_create(
        project=project,
        name="Who&When",
        taxonomy_version=project.taxonomy_version,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[traces[i].pk for i in ATTRIBUTIONS],
        kind=Round.Kind.ATTRIBUTION,
        by=manager,
    )
    round_open(round=who, by=manager)
    for user in (annotator, annotator2):
        for i, answer in ATTRIBUTIONS.items():
            _attribute(who, user, traces[i], answer)
    round_start_review(round=who, by=manager)
    round_close(round=who, by=manager)
    adjudication_record(round=pilot, trace=traces[0], mode="1.3", decision="absent", by=manager)
    round_close(round=pilot, by=manager)
    refined = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces,
        disagree_on=traces[1:3],
        name="Refined",
    )
    return {"traces": traces, "pilot": pilot, "who": who, "refined": refined}


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _chart(project, user):
    return trend_chart(round_kappa_trend(project=project, user=user))


def _page(user, project) -> str:
    return client_for(user).get(reverse("annotations:round_list", kwargs={"slug": project.slug})).content.decode()


def _axis(html: str) -> list[str]:
    return re.findall(r'class="rd-xlabel[^"]*"><title>[^<]*</title>([^<]*)</text>', html)


def test_an_attribution_round_stays_off_the_failure_mode_line(story, project, manager):
    chart = _chart(project, manager)
    by_series = {s: [p["name"] for p in chart["points"] if p["series"] == s] for s in ("modes", "attribution")}
    assert by_series == {"modes": ["Pilot", "Refined"], "attribution": ["Who&When"]}
    modes_line = [(g["x1"], g["x2"]) for g in chart["segments"] if g["series"] == "modes"]
    x = {r["name"]: r["x"] for r in chart["rounds"]}
    assert modes_line == [(x["Pilot"], x["Refined"])]  # the line skips the attribution round
    who = next(p for p in chart["points"] if p["series"] == "attribution")
    assert who["kappa"] == "1.00"  # both annotators named the same agent on every trace
    html = _page(manager, project)
    assert html.count('class="rd-point rd-s-attribution"') == 1
    assert "Attribution agreement" in html and "Failure-mode κ" in html


def test_points_are_named_by_the_rounds_in_the_order_they_were_opened(story, project, manager):
    assert story["who"].closed_at < story["pilot"].closed_at  # closing order differs from opening order
    assert _axis(_page(manager, project)) == ["Pilot", "Who&amp;When", "Refined"]


def test_a_round_in_review_is_a_provisional_point(story, project, manager):
    chart = _chart(project, manager)
    refined = next(p for p in chart["points"] if p["name"] == "Refined")
    assert refined["provisional"] and not any(p["provisional"] for p in chart["points"] if p["name"] != "Refined")
    assert [g["provisional"] for g in chart["segments"] if g["series"] == "modes"] == [True]
    html = _page(manager, project)
    assert html.count("rd-point rd-s-modes rd-provisional") == 1
    assert '<li class="rd-legend-provisional">' in html and "provisional: in review" in html


def test_an_annotator_of_an_open_round_learns_nothing_from_the_trend(story, project, manager, annotator, annotator2):
    before = _chart(project, annotator)
    rnd = round_create(
        project=project,
        name="Blind",
        taxonomy_version=project.taxonomy_version,
        annotators=[annotator, annotator2],
        method="manual",
        trace_ids=[t.pk for t in story["traces"]],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    for k, user in enumerate((annotator, annotator2)):
        for t in story["traces"]:
            label_via_workspace(round=rnd, user=user, trace=t, present={"1.1"} | ({"2.1"} if k else set()))
    for user in (annotator, manager):
        assert "Blind" not in [r["name"] for r in _chart(project, user)["rounds"]]
    # and the earlier rounds that share her blind traces are withheld from her (issue 27's blind
    # rule): no point of theirs would let her compare their agreement with what she labels now
    shown_before = {r["name"] for r in before["rounds"]}
    shown_now = {r["name"] for r in _chart(project, annotator)["rounds"]}
    assert {"Pilot", "Refined"} <= shown_before and not ({"Pilot", "Refined"} & shown_now)
    assert shown_now <= shown_before
    assert "Blind" not in _axis(_page(annotator, project))


def test_a_round_in_review_shows_only_to_who_may_read_its_report(story, project, manager, annotator, viewer):
    report = reverse("annotations:round_report", kwargs={"slug": project.slug, "pk": story["refined"].pk})
    assert client_for(viewer).get(report).status_code == 200
    assert "Refined" in _axis(_page(viewer, project))
    story["refined"].reveal_in_review = False
    story["refined"].save(update_fields=["reveal_in_review"])
    for user in (viewer, annotator):
        assert client_for(user).get(report).status_code == 403
        assert "Refined" not in _axis(_page(user, project))
    assert "Refined" in _axis(_page(manager, project))
