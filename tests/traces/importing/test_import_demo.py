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


def test_demo_frameworks_project_shows_a_done_a_refused_and_an_import_the_rest_import(
    project, manager, settings, tmp_path
):
    from traces.importing.demo import seed_frameworks
    from traces.models import ImportJob, TraceSource

    settings.MEDIA_ROOT = tmp_path
    ctx = DemoContext(project=project, users={"manager": manager})
    seed_frameworks(ctx)
    seed_frameworks(ctx)  # idempotent

    done, refused, rest = ImportJob.objects.filter(project__slug="frameworks").order_by("id")
    # AdaMAST's third record holds the same TaskResult as autogen_taskresult.json: merged, like the
    # second MAST-Data record of one trajectory
    assert (done.status, done.n_imported, done.n_merged) == ("done", 9, 2)
    formats = {line["format"] for line in done.report}
    assert {"Claude session JSONL", "AutoGen TaskResult", "smolagents memory steps", "Docent AgentRun"} <= formats
    assert len(done.report) == 10 and sum(line["status"] == "companion" for line in done.report) == 2
    assert TraceSource.objects.filter(trace__project__slug="frameworks").count() == 2
    assert (refused.status, refused.failure) == ("failed", "refused")
    assert [line["status"] for line in refused.report] == ["not stored", "refused"]
    # a Claude session cut off mid-write: its four whole records kept, the cut line listed
    assert (rest.status, rest.import_rest, rest.n_imported) == ("done", True, 1)
    assert [b["line"] for b in rest.report[0]["broken_lines"]] == [5]
    assert Trace.objects.filter(project__slug="frameworks").count() == 10
