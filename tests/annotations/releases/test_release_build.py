"""Building releases: formats, checksums, immutability, majority-vote flags, mapping across versions."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, transaction

from annotations.models import Release, ReleaseFile
from annotations.releases.services import release_build, release_create
from annotations.releases.writers import CSV_ATTRIBUTION
from taxonomy.services import mode_merge, mode_rename, version_draft_from, version_publish
from tests.annotations.releases_factories import (
    all_codes,
    annotate,
    closed_round,
    decisions,
    human_rater,
    make_trace,
    other_rater,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def labelled(project, mast_version, manager, annotator, annotator2):
    """Three traces: two adjudicated in a closed round, one labelled by two people only."""
    t1 = make_trace(project, mas_name="ChatDev", llm_name="gpt-4o")
    t2 = make_trace(project, mas_name="MetaGPT", llm_name="claude")
    t3 = make_trace(project, mas_name="AG2", llm_name="gpt-4o")
    rnd = closed_round(project, mast_version, {t1: {"1.3", "2.2"}, t2: {"3.3"}}, name="Round 1")
    for user in (annotator, annotator2):
        annotate(
            t1,
            human_rater(user),
            mast_version,
            decisions(mast_version, {"1.3"}),
            round=rnd,
            evidence=[{"step": 1}],
            rationale="repeats the plan",
        )
        annotate(t3, human_rater(user), mast_version, decisions(mast_version, {"2.6"}))
    annotate(t1, other_rater("gpt-judge"), mast_version, decisions(mast_version, {"1.3", "3.2"}))
    return {"t1": t1, "t2": t2, "t3": t3, "round": rnd}


def build(project, manager, **kw) -> Release:
    release = release_create(project=project, by=manager, enqueue=False, **kw)
    return release_build(release_id=release.pk)


def file_path(release: Release, kind: str) -> Path:
    from django.conf import settings

    row = release.files.get(kind=kind)
    return Path(settings.MEDIA_ROOT) / row.path


def jsonl_records(release: Release) -> list[dict]:
    return [json.loads(line) for line in file_path(release, "jsonl").read_text().splitlines()]


def test_release_numbers_count_up_per_project(project, manager, labelled):
    first = build(project, manager)
    second = build(project, manager, options={"trace_text": False})
    assert (first.number, second.number) == (1, 2)


def test_jsonl_records_have_the_mast_data_shape(project, manager, labelled, mast_version):
    release = build(project, manager)
    records = jsonl_records(release)
    rec = next(r for r in records if r["trace_id"] == labelled["t1"].external_id)
    assert set(rec) >= {"mas_name", "llm_name", "benchmark_name", "trace_id", "trace", "mast_annotation"}
    assert set(rec["trace"]) == {"key", "index", "trajectory"}
    assert rec["trace"]["trajectory"] == labelled["t1"].raw_text
    assert list(rec["mast_annotation"]) == all_codes(mast_version)
    assert rec["mast_annotation"]["1.3"] == 1 and rec["mast_annotation"]["1.1"] == 0
    assert rec["mast_studio"]["final_basis"]["1.3"] == "adjudicated"


def test_jsonl_includes_raters_judge_and_evidence(project, manager, labelled):
    release = build(project, manager)
    rec = next(r for r in jsonl_records(release) if r["trace_id"] == labelled["t1"].external_id)
    studio = rec["mast_studio"]
    assert sorted(studio["raters"]) == ["annotator_1", "annotator_2"]
    assert studio["raters"]["annotator_1"]["1.3"] == 1
    assert studio["judge"]["gpt-judge"]["3.2"] == 1
    assert studio["evidence"]["annotator_1"]["1.3"] == [{"step": 1}]
    assert studio["rationales"]["annotator_2"]["1.3"] == "repeats the plan"


def test_offline_baseline_is_released_with_the_judges_not_the_raters(project, manager, mast_version, labelled):
    from annotations.models import Rater

    baseline = other_rater("baseline tf-idf+logreg", kind=Rater.Kind.BASELINE)
    annotate(labelled["t1"], baseline, mast_version, decisions(mast_version, {"2.2"}))
    studio = next(r for r in jsonl_records(build(project, manager)) if r["trace_id"] == labelled["t1"].external_id)[
        "mast_studio"
    ]
    assert sorted(studio["judge"]) == ["baseline tf-idf+logreg", "gpt-judge"]
    assert studio["judge"]["baseline tf-idf+logreg"]["2.2"] == 1
    assert sorted(studio["raters"]) == ["annotator_1", "annotator_2"]


def test_references_only_release_has_no_trace_text(project, manager, labelled):
    release = build(project, manager, options={"trace_text": False})
    rec = jsonl_records(release)[0]
    assert rec["trace"]["trajectory"] is None
    assert rec["mast_studio"]["content_hash"]


def test_csv_has_one_row_per_trace_and_one_column_per_mode(project, manager, labelled, mast_version):
    release = build(project, manager)
    rows = list(csv.reader(io.StringIO(file_path(release, "csv").read_text())))
    header = rows[0]
    assert header[:6] == ["trace_id", "mas_name", "llm_name", "benchmark_name", "content_hash", "final_source"]
    assert header[6] == "studio_trace_id"
    n = len(all_codes(mast_version))
    assert header[7 : 7 + n] == [f"FM-{c}" for c in all_codes(mast_version)]
    assert header[7 + n :] == CSV_ATTRIBUTION
    assert len(rows) == 1 + 2
    t1 = next(r for r in rows if r[0] == labelled["t1"].external_id)
    assert t1[header.index("FM-1.3")] == "1" and t1[header.index("FM-1.1")] == "0"


def test_parquet_reads_back_with_pyarrow(project, manager, labelled, mast_version):
    release = build(project, manager)
    table = pq.read_table(file_path(release, "parquet"))
    assert table.num_rows == 2
    assert table.column_names == [
        "mas_name",
        "llm_name",
        "benchmark_name",
        "trace_id",
        "trace",
        "mast_annotation",
        "mast_studio",
        "studio_trace_id",
    ]
    rows = {r["trace_id"]: r for r in table.to_pylist()}
    assert rows[labelled["t1"].external_id]["studio_trace_id"] == labelled["t1"].pk
    assert rows[labelled["t1"].external_id]["mast_annotation"]["1.3"] == 1
    assert json.loads(rows[labelled["t2"].external_id]["mast_studio"])["final_source"] == "consensus"


def test_parquet_loads_with_hugging_face_datasets(project, manager, labelled, tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is pinned in requirements-dev.txt")
    release = build(project, manager)
    ds = datasets.load_dataset(
        "parquet", data_files=str(file_path(release, "parquet")), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert ds.num_rows == 2
    assert {"mas_name", "trace_id", "mast_annotation"} <= set(ds.column_names)
    assert sorted(r["mast_annotation"]["1.3"] for r in ds) == [0, 1]


def test_each_file_checksum_matches_its_bytes(project, manager, labelled):
    from django.conf import settings

    release = build(project, manager)
    kinds = set(release.files.values_list("kind", flat=True))
    assert kinds == {"jsonl", "csv", "parquet", "card", "manifest", "zip"}
    for f in release.files.all():
        data = (Path(settings.MEDIA_ROOT) / f.path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f.sha256
        assert len(data) == f.size_bytes


def test_zip_holds_data_card_and_manifest(project, manager, labelled):
    release = build(project, manager)
    with zipfile.ZipFile(file_path(release, "zip")) as zf:
        names = sorted(zf.namelist())
        card = zf.read("demo-v1/README.md").decode()
    assert names == [
        "demo-v1/README.md",
        "demo-v1/data.csv",
        "demo-v1/data.jsonl",
        "demo-v1/data.parquet",
        "demo-v1/manifest.json",
    ]
    assert "configs:" in card and "path: data.parquet" in card
    assert "| 1.3 | Step Repetition |" in card
    assert release.files.get(kind="jsonl").sha256 in card


def test_manifest_counts_traces_per_framework_and_describes_taxonomy(project, manager, labelled):
    release = build(project, manager)
    m = release.manifest
    assert m["counts"]["traces"] == 2
    assert m["counts"]["by_mas_name"] == {"ChatDev": 1, "MetaGPT": 1}
    assert len(m["taxonomy"]["modes"]) == 14 and m["taxonomy"]["modes"][0]["definition"]
    assert [a["round"] for a in m["agreement"]] == ["Round 1"]
    assert {f["name"] for f in m["files"]} == {"data.jsonl", "data.csv", "data.parquet"}


def test_published_release_refuses_update_in_the_database(project, manager, labelled):
    release = build(project, manager)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(title="changed")


def test_published_release_refuses_delete_in_the_database(project, manager, labelled):
    release = build(project, manager)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        Release.objects.filter(pk=release.pk).delete()


def test_published_release_files_cannot_be_changed(project, manager, labelled):
    release = build(project, manager)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        ReleaseFile.objects.filter(release=release).update(sha256="0" * 64)


def test_building_a_published_release_again_changes_nothing(project, manager, labelled):
    release = build(project, manager)
    again = release_build(release_id=release.pk)
    assert again.finished_at == release.finished_at
    assert again.files.count() == 6


def test_majority_vote_fills_traces_without_adjudication_and_is_flagged(project, manager, labelled):
    release = build(project, manager, options={"majority": True})
    rec = next(r for r in jsonl_records(release) if r["trace_id"] == labelled["t3"].external_id)
    assert rec["mast_annotation"]["2.6"] == 1
    assert rec["mast_studio"]["final_source"] == "majority_vote"
    assert set(rec["mast_studio"]["final_basis"].values()) == {"majority_vote"}
    assert release.manifest["counts"]["majority_traces"] == 1


def test_without_majority_traces_without_adjudication_are_left_out(project, manager, labelled):
    release = build(project, manager, options={"majority": False})
    assert labelled["t3"].external_id not in {r["trace_id"] for r in jsonl_records(release)}


def test_majority_vote_tie_stays_unknown(project, manager, mast_version, annotator, annotator2):
    t = make_trace(project)
    annotate(t, human_rater(annotator), mast_version, decisions(mast_version, {"1.1", "1.2"}))
    annotate(t, human_rater(annotator2), mast_version, decisions(mast_version, {"1.1"}))
    release = build(project, manager, options={"majority": True})
    rec = jsonl_records(release)[0]
    assert rec["mast_annotation"]["1.1"] == 1
    assert rec["mast_annotation"]["1.2"] is None
    assert rec["mast_annotation"]["1.3"] == 0


def test_labels_on_v1_are_mapped_to_v2_with_rename_and_merge(project, manager, mast_version):
    v2 = version_draft_from(source=mast_version)
    mode_rename(mode=v2.modes.get(code="1.1"), new_code="1.1b", new_name="Disobey the task spec")
    mode_merge(
        modes=[v2.modes.get(code="2.1"), v2.modes.get(code="2.2")],
        code="2.1m",
        name="Reset or ask",
        definition="Merged 2.1 and 2.2.",
    )
    version_publish(version=v2)
    t_a = make_trace(project)
    t_b = make_trace(project)
    closed_round(project, mast_version, {t_a: {"1.1", "2.2"}, t_b: set()})
    release = build(project, manager, taxonomy_version=v2)
    recs = {r["trace_id"]: r["mast_annotation"] for r in jsonl_records(release)}
    a, b = recs[t_a.external_id], recs[t_b.external_id]
    assert "1.1" not in a and "2.1" not in a and "2.2" not in a
    assert a["1.1b"] == 1 and a["2.1m"] == 1
    assert b["1.1b"] == 0 and b["2.1m"] == 0
    assert release.n_mapped == 2 * 13
    assert release.manifest["mapping"]["edges_by_kind"]["merge"] == 4
    assert release.manifest["mapping"]["source_versions"] == [1]


def test_releases_page_says_in_plain_words_what_mapped_labels_are(project, manager, mast_version, client):
    from django.urls import reverse

    v2 = version_draft_from(source=mast_version)
    mode_rename(mode=v2.modes.get(code="1.1"), new_code="1.1b", new_name="Disobey the task spec")
    version_publish(version=v2)
    closed_round(project, mast_version, {make_trace(project): {"1.1"}})
    build(project, manager, taxonomy_version=v2)
    client.force_login(manager)
    html = client.get(reverse("annotations:release_list", kwargs={"slug": project.slug})).content.decode()
    assert "labels people gave on another version of the taxonomy, brought onto MAST v2" in html
    assert "14 of the labels in this release came that way" in html


def test_round_selection_needs_a_closed_round(project, manager, mast_version):
    t = make_trace(project)
    rnd = closed_round(project, mast_version, {t: set()}, state="review")
    with pytest.raises(ValidationError, match="not closed"):
        release_create(project=project, by=manager, selection="round", round=rnd, enqueue=False)


def test_round_selection_holds_only_that_rounds_traces(project, manager, mast_version):
    t1, t2 = make_trace(project), make_trace(project)
    r1 = closed_round(project, mast_version, {t1: {"1.1"}})
    closed_round(project, mast_version, {t2: {"1.2"}})
    release = build(project, manager, selection="round", round=r1)
    assert [r["trace_id"] for r in jsonl_records(release)] == [t1.external_id]


def test_filter_selection_keeps_matching_frameworks(project, manager, labelled):
    release = build(project, manager, selection="filter", filters={"mas_name": ["MetaGPT"]})
    assert [r["mas_name"] for r in jsonl_records(release)] == ["MetaGPT"]


def test_unknown_format_is_refused_with_its_name(project, manager):
    with pytest.raises(ValidationError, match="xlsx"):
        release_create(project=project, by=manager, options={"formats": ["xlsx"]}, enqueue=False)


def test_annotator_cannot_create_a_release(project, annotator):
    with pytest.raises(PermissionDenied):
        release_create(project=project, by=annotator, enqueue=False)


def test_manifest_carries_the_rounds_stored_agreement_figures(project, manager, labelled, annotator, annotator2):
    from annotations.models import RoundAnnotator
    from annotations.rounds.services import agreement_report_get

    for user in (annotator, annotator2):
        RoundAnnotator.objects.create(round=labelled["round"], user=user)
    agreement_report_get(round=labelled["round"])
    release = build(project, manager)
    summary = release.manifest["agreement"][0]["summary"]
    assert summary["n_raters"] == 2
    assert any(isinstance(v, dict) and "value" in v for v in summary.values())
    card = file_path(release, "card").read_text()
    assert "no agreement report stored" not in card


def test_final_labels_equal_the_rounds_agreed_labels(project, manager, labelled, mast_version):
    from annotations.rounds.agreed import agreed_labels

    expected: dict[str, dict[str, int]] = {}
    by_pk = {t.pk: t.external_id for t in (labelled["t1"], labelled["t2"])}
    for row in agreed_labels(project=project, taxonomy_version=mast_version):
        expected.setdefault(by_pk[row.trace_id], {})[row.mode_code] = int(row.decision == "present")
    got = {r["trace_id"]: r["mast_annotation"] for r in jsonl_records(build(project, manager))}
    assert got == expected


def test_parquet_keeps_unknown_labels_as_null(project, manager, mast_version, annotator, annotator2):
    t = make_trace(project)
    annotate(t, human_rater(annotator), mast_version, decisions(mast_version, {"1.1", "1.2"}))
    annotate(t, human_rater(annotator2), mast_version, decisions(mast_version, {"1.1"}))
    release = build(project, manager, options={"majority": True})
    row = pq.read_table(file_path(release, "parquet")).to_pylist()[0]
    assert (row["mast_annotation"]["1.1"], row["mast_annotation"]["1.2"], row["mast_annotation"]["1.3"]) == (1, None, 0)
    assert row["trace"]["trajectory"] == t.raw_text


def test_trace_text_is_read_in_byte_bounded_batches(project, manager, mast_version, monkeypatch):
    from annotations.releases import records as records_module

    monkeypatch.setattr(records_module, "TEXT_BATCH_BYTES", 1)  # one trace per batch
    traces = [make_trace(project) for _ in range(5)]
    closed_round(project, mast_version, {t: {"1.1"} for t in traces})
    records = jsonl_records(build(project, manager))
    assert [r["trace"]["trajectory"] for r in records] == [t.raw_text for t in traces]


def test_repeating_an_identical_request_returns_the_same_release(project, manager, labelled):
    first = release_create(project=project, by=manager, enqueue=False, title="Same")
    again = release_create(project=project, by=manager, enqueue=False, title="Same")
    assert again.pk == first.pk and Release.objects.count() == 1


def test_a_bulk_correction_of_agreed_labels_makes_the_next_request_a_new_release(project, manager, labelled):
    from annotations.models import Adjudication

    first = release_create(project=project, by=manager, enqueue=False, title="Same")
    # neither through a service nor touching Adjudication.at (auto_now): the stamp still moves
    Adjudication.objects.filter(trace=labelled["t2"], mode__code="3.3").update(decision="absent")
    again = release_create(project=project, by=manager, enqueue=False, title="Same")
    assert again.pk != first.pk and again.number == first.number + 1


def test_a_new_release_is_numbered_once_labels_changed(project, manager, labelled, mast_version):
    first = build(project, manager)
    annotate(labelled["t2"], other_rater("another-judge"), mast_version, decisions(mast_version, {"1.1"}))
    second = build(project, manager)
    assert (first.number, second.number) == (1, 2)
