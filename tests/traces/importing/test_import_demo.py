"""The demo seed imports one trace per framework plus MAST-Data records, idempotently."""

from __future__ import annotations

import pytest

from annotations.demo import DemoContext
from annotations.models import Annotation
from traces.importing.demo import seed
from traces.models import Trace

pytestmark = pytest.mark.django_db


def test_demo_seed_imports_every_framework_and_is_idempotent(project, manager):
    ctx = DemoContext(project=project, users={"manager": manager})
    seed(ctx)
    seed(ctx)

    assert Trace.objects.filter(project=project).count() == 10
    assert set(Trace.objects.values_list("mas_name", flat=True)) == {
        "ChatDev",
        "MetaGPT",
        "AG2",
        "HyperAgent",
        "AppWorld",
        "Magentic-One",
        "OpenManus",
    }
    assert Annotation.objects.filter(rater__name="MAST-Data judge").count() == 3
    assert ctx.log[-1].startswith("Traces: 0 imported, 10 already there")
