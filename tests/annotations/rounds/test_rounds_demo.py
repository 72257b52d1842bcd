"""The demo's rounds: a closed adjudicated pilot, a refined version, a second round in review;
running the step twice changes nothing."""

from __future__ import annotations

import pytest

from annotations.demo import seed_users_and_project
from annotations.models import Adjudication, AgreementReport, Annotation, DisagreementComment, Round
from annotations.rounds.demo import seed
from taxonomy.models import ModeMapping


@pytest.fixture
def ctx(db):
    from traces.importing.demo import seed as seed_traces

    c = seed_users_and_project()
    seed_traces(c)
    return c


def test_demo_seeds_a_closed_round_a_refined_version_and_a_round_in_review(ctx):
    seed(ctx)
    pilot = Round.objects.get(project=ctx.project, name="Pilot round")
    second = Round.objects.get(project=ctx.project, name="Round 2")
    assert pilot.state == "closed" and second.state == "review"
    assert not Adjudication.objects.filter(round=pilot).exclude(basis__in=["unanimous", "adjudicated"]).exists()
    assert Adjudication.objects.filter(round=pilot, basis="adjudicated").count() >= 5
    assert AgreementReport.objects.filter(round__in=[pilot, second], rater_set="humans").count() == 2
    assert second.taxonomy_version.parent_id == pilot.taxonomy_version_id
    assert ModeMapping.objects.get(version=second.taxonomy_version, new_code="2.5").kind == "edit"
    assert DisagreementComment.objects.filter(round=pilot).count() == 2


def test_demo_rounds_step_is_idempotent(ctx):
    seed(ctx)
    counts = (
        Round.objects.count(),
        Annotation.objects.count(),
        Adjudication.objects.count(),
        DisagreementComment.objects.count(),
    )
    seed(ctx)
    assert counts == (
        Round.objects.count(),
        Annotation.objects.count(),
        Adjudication.objects.count(),
        DisagreementComment.objects.count(),
    )


def test_demo_seeds_an_open_blind_round_once(ctx):
    from annotations.rounds.demo import BLIND_ROUND, seed_blind_round

    seed(ctx)
    seed_blind_round(ctx)
    seed_blind_round(ctx)
    rounds = Round.objects.filter(project=ctx.project, name=BLIND_ROUND)
    assert [r.state for r in rounds] == ["open"]
    submitted = Annotation.objects.filter(round=rounds[0], state="submitted")
    assert [a.rater.user.username for a in submitted] == ["alice"]


def test_demo_trend_shows_both_series_and_a_provisional_point(ctx):
    from annotations.rounds import attribution_demo
    from annotations.rounds.demo import seed_blind_round
    from annotations.rounds.report import trend_chart
    from annotations.rounds.selectors import round_kappa_trend

    seed(ctx)
    seed_blind_round(ctx)
    attribution_demo.seed(ctx)
    chart = trend_chart(round_kappa_trend(project=ctx.project, user=ctx.users["manager"]))
    shown = [(p["name"], p["series"], p["provisional"]) for p in chart["points"]]
    assert shown == [
        ("Pilot round", "modes", False),
        ("Round 2", "modes", True),
        (attribution_demo.ROUND, "attribution", False),
    ]  # the open blind round is not there (alice, who labels it, is not shown the rounds sharing its traces)
