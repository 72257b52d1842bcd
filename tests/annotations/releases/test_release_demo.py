"""The demo step builds release v1 once and nothing more while the labels are unchanged."""

from __future__ import annotations

import pytest

from annotations.models import Release, Round
from annotations.releases.demo import seed
from tests.annotations.releases_factories import annotate, closed_round, decisions, make_trace, other_rater

pytestmark = pytest.mark.django_db


class Ctx:
    def __init__(self, project, manager):
        self.project, self.users, self.log = project, {"manager": manager}, []

    def say(self, line):
        self.log.append(line)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def test_demo_seed_builds_v1_and_is_idempotent(project, manager, mast_version):
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"1.3"}})
    seed(Ctx(project, manager))
    seed(Ctx(project, manager))
    assert list(Release.objects.values_list("number", "status")) == [(1, "done")]
    # the release came back into a project of its own: its agreed labels as a closed round
    back = Round.objects.get(project__slug="release-back")
    assert (back.name, back.state, back.adjudications.count()) == ("release v1 of demo", "closed", 14)


def test_demo_seed_builds_v2_after_labels_change(project, manager, mast_version):
    t = make_trace(project)
    closed_round(project, mast_version, {t: {"1.3"}})
    seed(Ctx(project, manager))
    annotate(t, other_rater("gpt-judge"), mast_version, decisions(mast_version, {"2.2"}))
    seed(Ctx(project, manager))
    assert Release.objects.count() == 2


def test_demo_seed_says_why_without_a_closed_round(project, manager):
    ctx = Ctx(project, manager)
    seed(ctx)
    assert not Release.objects.exists() and "no closed round" in ctx.log[0]
