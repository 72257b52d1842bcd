"""The demo holds a promoted open code (visible right after `make demo`); seeding twice changes nothing."""

from __future__ import annotations

import pytest

from annotations.codes.demo import CODE, seed
from annotations.demo import seed_users_and_project
from annotations.models import OpenCode
from taxonomy.models import ModeMapping, TaxonomyVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def ctx(db):
    from annotations.labels.demo import seed as seed_labels
    from annotations.rounds.demo import seed as seed_rounds
    from traces.importing.demo import seed as seed_traces

    c = seed_users_and_project()
    seed_traces(c)
    seed_labels(c)
    seed_rounds(c)
    return c


def test_demo_promotes_an_open_code_into_a_draft_after_round_2s_version(ctx):
    seed(ctx)
    code = OpenCode.objects.get(project=ctx.project, name=CODE)
    mode = code.promoted_mode
    assert mode is not None and mode.code == "1.6" and code.promoted_how == "add"
    assert mode.version.status == TaxonomyVersion.Status.DRAFT
    assert mode.version.parent.number == 2  # Round 2's refined MAST v2, not a sibling of it
    assert "bob" in mode.examples
    assert CODE in ModeMapping.objects.get(version=mode.version, new_code="1.6").note


def test_demo_promotion_is_idempotent(ctx):
    seed(ctx)
    counts = (TaxonomyVersion.objects.count(), ModeMapping.objects.count())
    seed(ctx)
    assert counts == (TaxonomyVersion.objects.count(), ModeMapping.objects.count())
