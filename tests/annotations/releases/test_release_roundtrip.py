"""Round trip: a release's JSONL imported into a new project gives the same traces and labels.

Traces are imported with the real importer (traces_import); a release's agreed labels come back
as agreed labels (a closed round named after the release), its raters' as imported raters, and
releasing the new project gives the same labels again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from annotations.labels.imported import MAST_DATA_RATER
from annotations.models import Adjudication, Annotation, ModeLabel, Rater, Round
from annotations.releases.services import release_build, release_create
from tests.annotations.releases_factories import closed_round
from tests.factories import ProjectFactory
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Trace
from traces.projects.services import membership_set

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


def _annotations(jsonl: Path) -> dict[str, dict]:
    return {
        r["mast_studio"]["content_hash"]: r["mast_annotation"] for r in map(json.loads, jsonl.read_text().splitlines())
    }


def test_reimported_release_keeps_its_agreed_labels_as_agreed_labels_with_provenance(exported, mast_version):
    traces, jsonl = exported
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    traces_import(project=target, paths_or_files=[jsonl])

    (rnd,) = Round.objects.filter(project=target)
    assert (rnd.name, rnd.state) == ("release v1 of demo", "closed")
    assert rnd.imported_from.startswith("release v1 of demo")
    got: dict[str, dict[str, int]] = {}
    for digest, code, decision in Adjudication.objects.filter(round=rnd).values_list(
        "trace__content_hash", "mode__code", "decision"
    ):
        got.setdefault(digest, {})[code] = int(decision == "present")
    records = _annotations(jsonl)
    assert got == {h: {c: v for c, v in labels.items() if v is not None} for h, labels in records.items()}
    # not the MAST-Data judge's: those are a dataset's judge, these were agreed by people
    assert not Annotation.objects.filter(trace__project=target, rater__name=MAST_DATA_RATER).exists()


def test_exporting_the_reimported_release_gives_the_same_labels(exported, mast_version, manager):
    _traces, jsonl = exported
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    traces_import(project=target, paths_or_files=[jsonl])
    membership_set(project=target, user=manager, role="manager")
    again = release_build(release_id=release_create(project=target, by=manager, enqueue=False).pk)
    second = Path(settings.MEDIA_ROOT) / again.files.get(kind="jsonl").path
    assert _annotations(second) == _annotations(jsonl)
    studio = json.loads(second.read_text().splitlines()[0])["mast_studio"]
    assert studio["release"] == {"project": "copy", "number": 1}


def test_a_release_with_raters_brings_them_back_as_imported_raters(project, mast_version, manager):
    from tests.annotations.releases_factories import annotate, decisions, make_trace, other_rater

    t1 = make_trace(project, mas_name="ChatDev", llm_name="gpt-4o")
    closed_round(project, mast_version, {t1: {"1.3"}})
    annotate(t1, other_rater("lab B"), mast_version, decisions(mast_version, {"1.3", "2.2"}))
    release = release_build(
        release_id=release_create(project=project, by=manager, enqueue=False, options={"raters": True}).pk
    )
    jsonl = Path(settings.MEDIA_ROOT) / release.files.get(kind="jsonl").path
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    traces_import(project=target, paths_or_files=[jsonl])
    rater = Rater.objects.get(name="lab B (release v1 of demo)")
    assert rater.kind == "imported"
    present = set(
        ModeLabel.objects.filter(annotation__rater=rater, decision="present").values_list("mode__code", flat=True)
    )
    assert present == {"1.3", "2.2"}


def test_a_release_whose_modes_the_project_lacks_is_refused_naming_them(exported, manager):
    _traces, jsonl = exported
    target = ProjectFactory(slug="copy")
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    lines[0]["mast_annotation"]["9.9"] = 1
    jsonl.write_text("\n".join(json.dumps(r) for r in lines))
    with pytest.raises(TraceImportError, match=r"modes 9\.9 are not in"):
        traces_import(project=target, paths_or_files=[jsonl])
    assert not Round.objects.filter(project=target).exists()


def test_the_release_round_shows_on_the_rounds_pages(exported, mast_version, manager, client):
    from django.urls import reverse

    _traces, jsonl = exported
    target = ProjectFactory(slug="copy", taxonomy_version=mast_version)
    traces_import(project=target, paths_or_files=[jsonl])
    membership_set(project=target, user=manager, role="manager")
    rnd = Round.objects.get(project=target)
    client.force_login(manager)
    listing = client.get(reverse("annotations:round_list", args=["copy"]))
    html = listing.content.decode()
    assert listing.status_code == 200 and "release v1 of demo" in html
    assert "decisions imported, no raters&#x27; labels" in html or "decisions imported, no raters' labels" in html
    assert "Imported rounds" not in html  # no agreement to chart: no empty chart
    for name in ("annotations:round_detail", "annotations:round_report"):
        page = client.get(reverse(name, args=["copy", rnd.pk]))
        assert page.status_code == 200, (name, page.status_code)

