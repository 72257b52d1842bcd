"""Round trip: a release's JSONL imported into a new project gives the same traces and labels.

Traces are imported with the real importer (traces_import); MAST-Data records' mast_annotation
become the "MAST-Data judge" rater's labels in the new project.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from annotations.labels.imported import MAST_DATA_RATER
from annotations.models import ModeLabel
from annotations.releases.services import release_build, release_create
from tests.annotations.releases_factories import closed_round
from tests.factories import ProjectFactory
from traces.importing.service import traces_import
from traces.models import Trace

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
SAMPLES = [
    ("ChatDev", "chatdev_tiny.log"),
    ("MetaGPT", "metagpt_run.json"),
    ("AG2", "ag2_mathchat_human.json"),
    ("Magentic-One", "magentic_console_log.txt"),
    ("OpenManus", "openmanus_cutoff.log"),
]


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def exported(project, mast_version, manager, tmp_path):
    traces_import(project=project, paths_or_files=[FIXTURES / name for _fw, name in SAMPLES])
    traces = list(Trace.objects.filter(project=project).order_by("id"))
    assert len(traces) == len(SAMPLES)
    present = {
        traces[0]: {"1.3", "2.6"},
        traces[1]: {"3.3"},
        traces[2]: set(),
        traces[3]: {"1.1", "1.5", "3.2"},
        traces[4]: {"2.4"},
    }
    closed_round(project, mast_version, present)
    release = release_build(release_id=release_create(project=project, by=manager, enqueue=False).pk)
    row = release.files.get(kind="jsonl")
    return traces, Path(settings.MEDIA_ROOT) / row.path


def test_reimported_release_has_the_same_traces(exported, mast_version):
    traces, jsonl = exported
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    result = traces_import(project=target, paths_or_files=[jsonl])
    copies = {t.content_hash: t for t in Trace.objects.filter(project=target)}
    assert len(copies) == len(traces) == result.imported
    for t in traces:
        c = copies[t.content_hash]
        assert c.raw_text == t.raw_text
        assert (c.mas_name, c.llm_name, c.benchmark) == (t.mas_name, t.llm_name, t.benchmark)
        assert c.external_id == t.external_id  # the source's own id, never the database id


def test_reimported_release_has_the_same_labels(exported, mast_version):
    _traces, jsonl = exported
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    traces_import(project=target, paths_or_files=[jsonl])
    source = {t.content_hash: t for t in Trace.objects.filter(project=exported[0][0].project)}
    records = {
        r["mast_studio"]["content_hash"]: r["mast_annotation"] for r in map(json.loads, jsonl.read_text().splitlines())
    }
    assert set(records) == set(source)
    got: dict[str, dict[str, int]] = {}
    for digest, code, decision in ModeLabel.objects.filter(
        annotation__trace__project=target, annotation__rater__name=MAST_DATA_RATER
    ).values_list("annotation__trace__content_hash", "mode__code", "decision"):
        got.setdefault(digest, {})[code] = int(decision == "present")
    assert got == {h: {c: v for c, v in labels.items() if v is not None} for h, labels in records.items()}
