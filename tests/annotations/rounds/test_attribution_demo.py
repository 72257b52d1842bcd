"""The demo's attribution: Who&When traces with ground truth, a closed round with attribution agreement."""

from __future__ import annotations

import pytest

from annotations.analytics.attribution import attribution_rows
from annotations.demo import seed_users_and_project
from annotations.models import AttributionDecision, Round
from annotations.rounds.attribution_demo import ROUND, seed
from annotations.rounds.services import agreement_report_get


@pytest.fixture
def ctx(db):
    return seed_users_and_project()


def test_demo_seeds_attributed_traces_and_a_round_with_attribution_agreement(ctx):
    seed(ctx)
    rnd = Round.objects.get(project=ctx.project, name=ROUND)
    assert rnd.state == "closed"
    bases = sorted(AttributionDecision.objects.filter(round=rnd).values_list("basis", flat=True))
    assert bases == ["adjudicated", "adjudicated", "unanimous"]
    section = agreement_report_get(round=rnd).data["attribution"]
    assert section["n_traces"] == 3 and section["step"]["exact"]["value"] is not None
    rows = attribution_rows(user=ctx.users["manager"], project=ctx.project)
    assert sorted((r["agent"], r["step"]) for r in rows) == [("Coder", 1), ("Planner", 0), ("Planner", 2)]


def test_demo_attribution_step_is_idempotent(ctx):
    seed(ctx)
    seed(ctx)
    assert Round.objects.filter(project=ctx.project, name=ROUND).count() == 1
    assert "already there" in ctx.log[-1]
