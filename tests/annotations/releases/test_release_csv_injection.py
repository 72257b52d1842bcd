"""Text a rater typed cannot become a live formula in a spreadsheet that opens a CSV release, and
the other formats keep it exactly; numbers in CSV downloads stay numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from django.conf import settings

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Release
from annotations.releases.services import release_build, release_create
from annotations.rounds.attribution.consensus import attribution_adjudicate
from annotations.rounds.services import round_close, round_start_review
from tests.annotations.rounds_factories import codes, make_open_round
from tests.annotations.workspace_factories import make_trace
from traces.csv_cells import csv_cell, csv_row

pytestmark = pytest.mark.django_db

FORMULA = '=HYPERLINK("http://x","y")'


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def test_a_formula_typed_as_a_reason_comes_back_inert_from_the_csv_release(project, manager, annotator, annotator2):
    trace = make_trace(project, n_steps=4, title="formula")
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=[trace])
    labels = [{"code": c, "decision": "present" if c == "1.1" else "absent"} for c in codes(rnd.taxonomy_version)]
    for user, step in ((annotator, 2), (annotator2, 3)):  # they disagree on the decisive step
        ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=rnd.taxonomy_version, round=rnd)
        attribution = {"step": step, "agent": "@Planner", "modes": ["1.1"], "reason": FORMULA}
        ann = annotation_save(annotation=ann, by=user, base_revision=0, labels=labels, attribution=attribution)
        annotation_submit(annotation=ann, by=user, base_revision=ann.revision)
    round_start_review(round=rnd, by=manager)
    # The adjudicator takes the first rater's answer, rationale and all.
    attribution_adjudicate(round=rnd, trace=trace, step=2, agent="@Planner", modes=["1.1"], reason=FORMULA, by=manager)
    round_close(round=rnd, by=manager)
    release = release_create(project=project, by=manager, options={"formats": ["jsonl", "csv"]}, enqueue=False)
    release = release_build(release_id=release.pk)
    assert release.status == Release.Status.DONE, release.error
    files = {f.kind: Path(settings.MEDIA_ROOT) / f.path for f in release.files.all()}

    rows = list(csv.DictReader(io.StringIO(files["csv"].read_text(encoding="utf-8"))))
    assert len(rows) == 1
    assert rows[0]["attribution_reason"] == "'" + FORMULA
    assert rows[0]["responsible_agent"] == "'@Planner"
    assert (rows[0]["FM-1.1"], rows[0]["decisive_step"]) == ("1", "2")  # numbers untouched
    # JSONL keeps the text as it was written; the card says how the CSV differs.
    record = json.loads(files["jsonl"].read_text(encoding="utf-8").splitlines()[0])
    assert record["mast_studio"]["attribution"]["reason"] == FORMULA
    assert record["mast_studio"]["attribution"]["agent"] == "@Planner"
    assert "single quote" in files["card"].read_text(encoding="utf-8")


@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "-cmd|' /C calc'!A0"])
def test_text_a_spreadsheet_would_run_gets_a_quote(text):
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-0.25, 3, "-0.25", "+3", "-1e-05", "0.5", "plain text", "", None, "a=b"])
def test_numbers_and_ordinary_text_are_left_alone(value):
    assert csv_cell(value) == value


def test_a_row_is_neutralised_cell_by_cell():
    assert csv_row(["=x", -0.25, "-0.25", "ok"]) == ["'=x", -0.25, "-0.25", "ok"]
