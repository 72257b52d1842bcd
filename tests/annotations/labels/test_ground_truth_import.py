"""Who&When files (JSON and the Hub's Parquet) import with their ground truth as a source rater's attribution."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotations.labels.imported_attribution import TRAIL_RATER, WHOWHEN_RATER, trail_located_errors
from annotations.models import Attribution
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Trace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import" / "whowhen"
RECORDS = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("ww-*.json"))]


def hub_parquet(records, tmp_path, *, history_as_text=False) -> Path:
    """A Parquet file shaped like the Hub's Who&When split (history a list of structs, mistake_step text)."""
    rows = [{**r, "history": json.dumps(r["history"]) if history_as_text else r["history"]} for r in records]
    path = tmp_path / "who_and_when.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def stored(project):
    return {
        a.annotation.trace.external_id: a
        for a in Attribution.objects.filter(annotation__trace__project=project).select_related(
            "annotation__trace", "annotation__rater"
        )
    }


def test_whowhen_json_files_store_each_traces_ground_truth(project):
    traces_import(project=project, paths_or_files=sorted(FIXTURES.glob("ww-*.json")))
    got = stored(project)
    assert sorted(got) == ["ww-1", "ww-2", "ww-3"]
    a = got["ww-2"]
    assert (a.decisive_step, a.agent, a.annotation.rater.name) == (2, "Planner", WHOWHEN_RATER)
    assert a.reason == "The Planner took the largest city for the capital."
    assert a.annotation.rater.kind == "imported" and a.annotation.state == "submitted"
    assert a.annotation.trace.steps.get(index=2).agent == "Planner"


@pytest.mark.parametrize("history_as_text", [False, True])
def test_the_hubs_parquet_is_read_row_by_row_with_the_rest_kept_as_metadata(project, tmp_path, history_as_text):
    result = traces_import(
        project=project, paths_or_files=[hub_parquet(RECORDS, tmp_path, history_as_text=history_as_text)]
    )
    assert result.imported == 3
    got = stored(project)
    assert {k: (v.decisive_step, v.agent) for k, v in got.items()} == {
        "ww-1": (1, "Coder"),
        "ww-2": (2, "Planner"),
        "ww-3": (0, "Planner"),
    }
    trace = Trace.objects.get(project=project, external_id="ww-1")
    assert trace.format == "whowhen" and trace.n_steps == 4 and trace.outcome == "failure"
    assert trace.metadata["row"]["ground_truth"] == "51"
    assert trace.metadata["row"]["question"] == "What is 17 * 3?"
    assert trace.title == "ww-1"


def test_parquet_and_json_of_the_same_record_are_the_same_trace(project, tmp_path):
    traces_import(project=project, paths_or_files=[FIXTURES / "ww-1.json"])
    result = traces_import(project=project, paths_or_files=[hub_parquet(RECORDS[:1], tmp_path)])
    assert (result.imported, result.duplicates) == (0, 1)


def test_a_mistake_step_outside_the_trace_refuses_the_import_naming_the_row(project, tmp_path):
    bad = [RECORDS[0], {**RECORDS[1], "mistake_step": "9"}]
    with pytest.raises(TraceImportError, match=r"row 2: mistake_step 9 is outside the trace \(steps 0-3\)"):
        traces_import(project=project, paths_or_files=[hub_parquet(bad, tmp_path)])
    assert not Trace.objects.filter(project=project).exists()


def test_a_parquet_without_a_trace_column_is_refused_with_its_columns(project, tmp_path):
    path = tmp_path / "x.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": "a"}]), path)
    with pytest.raises(TraceImportError, match="no trace column.*it has question, answer"):
        traces_import(project=project, paths_or_files=[path])


def test_a_truncated_parquet_is_refused(project, tmp_path):
    data = hub_parquet(RECORDS, tmp_path).read_bytes()
    path = tmp_path / "cut.parquet"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceImportError, match="not a readable Parquet file"):
        traces_import(project=project, paths_or_files=[path])


def test_trail_errors_are_located_on_the_steps_of_their_spans():
    labels = json.dumps(
        {
            "errors": [
                {
                    "category": "Tool-related",
                    "location": "span-b",
                    "evidence": "404",
                    "description": "bad URL",
                    "impact": "HIGH",
                },
                {
                    "category": "Formatting Errors",
                    "location": "span-a",
                    "evidence": "",
                    "description": "no JSON",
                    "impact": "LOW",
                },
            ]
        }
    )
    out = trail_located_errors(labels, span_ids=["span-a", "span-b"], where="t.parquet, record 1")
    assert out == [
        {"step": 0, "mode": "", "severity": "low", "category": "Formatting Errors", "note": "no JSON"},
        {"step": 1, "mode": "", "severity": "high", "category": "Tool-related", "note": "bad URL 404"},
    ]
    with pytest.raises(TraceImportError, match="span 'span-z', which no step"):
        trail_located_errors({"errors": [{"location": "span-z"}]}, span_ids=["span-a"], where="t")
    assert TRAIL_RATER == "TRAIL ground truth"


def test_parquet_bytes_start_with_the_magic_number(tmp_path):
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"trace": "x"}]), buf)
    assert buf.getvalue()[:4] == b"PAR1"


TRAIL_TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "import" / "trail_trace.json"
TRAIL_LABELS = {
    "trace_id": "trail-demo",
    "errors": [
        {
            "category": "Tool-related",
            "location": "s23",
            "evidence": "timeout",
            "description": "search failed",
            "impact": "HIGH",
        },
        {
            "category": "Goal Deviation",
            "location": "s29",
            "evidence": "",
            "description": "answered early",
            "impact": "MEDIUM",
        },
    ],
}


def _trail_errors_of(project) -> list[dict]:
    (a,) = Attribution.objects.filter(annotation__trace__project=project, annotation__rater__name=TRAIL_RATER)
    return a.errors


def _span_step(project, span_id: str) -> int:
    trace = Trace.objects.get(project=project, format="trail")
    return trace.metadata["span_ids"].index(span_id)


def test_trail_parquet_rows_store_their_located_errors_on_the_steps_of_their_spans(project, tmp_path):
    path = tmp_path / "trail.parquet"
    pq.write_table(pa.Table.from_pylist([{"trace": TRAIL_TRACE.read_text(), "labels": json.dumps(TRAIL_LABELS)}]), path)
    result = traces_import(project=project, paths_or_files=[path])
    assert result.imported == 1
    trace = Trace.objects.get(project=project)
    assert trace.format == "trail" and trace.steps.get(index=_span_step(project, "s23")).kind in ("tool_call", "tool")
    errors = _trail_errors_of(project)
    assert [(e["step"], e["severity"], e["category"]) for e in errors] == [
        (_span_step(project, "s23"), "high", "Tool-related"),
        (_span_step(project, "s29"), "medium", "Goal Deviation"),
    ]


def test_a_trail_json_file_with_its_labels_stores_them_too(project, tmp_path):
    path = tmp_path / "trail_with_labels.json"
    path.write_text(json.dumps({**json.loads(TRAIL_TRACE.read_text()), "labels": TRAIL_LABELS}))
    traces_import(project=project, paths_or_files=[path])
    assert [e["category"] for e in _trail_errors_of(project)] == ["Tool-related", "Goal Deviation"]
