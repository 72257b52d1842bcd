"""The demo's workspace labels include one changed on purpose after submitting (reopened, resubmitted)."""

from __future__ import annotations

import pytest

from annotations.demo import seed_users_and_project
from annotations.labels.demo import seed
from annotations.models import AnnotationEvent


@pytest.fixture
def ctx(db):
    from traces.importing.demo import seed as seed_traces

    c = seed_users_and_project()
    seed_traces(c)
    return c


def test_the_demo_has_an_annotation_reopened_and_submitted_again(ctx):
    seed(ctx)
    reopened = AnnotationEvent.objects.filter(action="reopen").values_list("annotation", flat=True)
    assert len(reopened) == 1
    actions = AnnotationEvent.objects.filter(annotation=reopened[0]).order_by("revision")
    assert list(actions.values_list("action", flat=True)) == ["save", "submit", "reopen", "save", "submit"]
