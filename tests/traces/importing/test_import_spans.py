"""Importing span files on PostgreSQL: the tree, models, tokens and timing are stored; bad files store nothing."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Step, Trace

pytestmark = pytest.mark.django_db

SPAN_FIXTURES = [
    # (file, format, framework, traces in the file, agents of the first trace)
    ("otlp_genai.jsonl", "otlp", "OpenAI Agents SDK", 1, ["Orchestrator", "user", "Researcher", "Analyst"]),
    ("otlp_indexed.json", "otlp", "CrewAI", 1, ["Researcher", "user", "Analyst"]),
    ("phoenix_spans.jsonl", "openinference", "", 2, ["Supervisor", "Researcher", "Analyst"]),
    ("trail_trace.json", "trail", "smolagents", 1, ["manager", "search_agent", "user"]),
    ("langfuse_trace.json", "langfuse", "", 1, ["Planner", "Researcher", "Analyst"]),
    ("langsmith_runs.json", "langsmith", "LangChain", 1, ["supervisor", "user", "researcher", "analyst"]),
    ("openai_agents_trace.json", "openai_agents", "OpenAI Agents SDK", 1, ["Triage", "user", "Researcher", "Analyst"]),
]


@pytest.mark.parametrize(
    ("name", "fmt", "framework", "n_traces", "agents"), SPAN_FIXTURES, ids=[f[0] for f in SPAN_FIXTURES]
)
def test_each_span_file_imports_with_its_tree(project, import_fixtures, name, fmt, framework, n_traces, agents):
    result = traces_import(project=project, paths_or_files=[import_fixtures / name])

    assert (result.imported, result.duplicates) == (n_traces, 0)
    trace = Trace.objects.get(pk=result.trace_ids[0])
    assert (trace.format, trace.mas_name, trace.agents) == (fmt, framework, agents)
    assert trace.n_steps >= 10 and trace.metadata["source_file"].endswith(name)
    steps = list(trace.steps.order_by("index"))
    assert any(s.parent_index is not None for s in steps)
    by_index = {s.index: s for s in steps}
    for s in steps:
        if s.kind == "tool_output":
            assert by_index[s.parent_index].kind == "tool_call"
    answers = [s for s in steps if s.output_tokens]
    assert answers and all(s.model and s.started_at and s.duration_ms is not None for s in answers)


def test_the_stored_step_keeps_model_tokens_timing_and_parent(project, import_fixtures):
    result = traces_import(project=project, paths_or_files=[import_fixtures / "otlp_genai.jsonl"])
    trace = Trace.objects.get(pk=result.trace_ids[0])
    call = trace.steps.get(agent="Researcher", kind="tool_call", content__contains="call web_search(")
    parent = trace.steps.get(index=call.parent_index)
    assert (parent.agent, parent.kind, parent.content.splitlines()[1]) == ("Researcher", "system", "Researcher invoked")
    assert (call.model, call.input_tokens, call.output_tokens, call.duration_ms) == ("gpt-4o-mini", 230, 31, 1300)
    assert call.started_at == dt.datetime(2025, 12, 1, 12, 0, 2, 200000, tzinfo=dt.UTC)
    assert trace.title == "invoke_agent Orchestrator · 5b8efff79803"
    assert (trace.external_id, trace.llm_name) == ("5b8efff798038103d269b633813fc60c", "gpt-4o-mini")
    assert trace.metadata["models"] == {"gpt-4o-2024-08-06": 1, "gpt-4o-mini": 3, "gpt-4o": 3}


def test_flat_formats_store_no_tree(project, demo_data):
    result = traces_import(project=project, paths_or_files=[demo_data / "ag2" / "mathchat_demo_human.json"])
    steps = Step.objects.filter(trace_id=result.trace_ids[0])
    assert not steps.filter(parent_index__isnull=False).exists()
    assert set(steps.values_list("model", flat=True)) == {""}


def test_an_uploaded_span_file_is_read_like_a_path(project, import_fixtures):
    upload = SimpleUploadedFile("spans.jsonl", (import_fixtures / "phoenix_spans.jsonl").read_bytes())
    result = traces_import(project=project, paths_or_files=[upload])
    assert result.imported == 2
    assert sorted(Trace.objects.values_list("external_id", flat=True)) == [
        "6c80880dbeb609e2ed41e06a6397a0dd",
        "77a3d2c1e0f94b5aa1c2d3e4f5061728",
    ]


def test_a_span_file_imported_twice_is_skipped_as_duplicates(project, import_fixtures):
    traces_import(project=project, paths_or_files=[import_fixtures / "phoenix_spans.jsonl"])
    again = traces_import(project=project, paths_or_files=[import_fixtures / "phoenix_spans.jsonl"])
    assert (again.imported, again.duplicates) == (0, 2)


def _otlp(trace_id: str, spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": trace_id, **s} for s in spans]}]}]})


def test_a_trace_without_content_refuses_the_whole_file_and_stores_nothing(project, row_counts):
    good = _otlp(
        "t1",
        [
            {
                "spanId": "a",
                "name": "chat",
                "attributes": [
                    {
                        "key": "gen_ai.input.messages",
                        "value": {"stringValue": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'},
                    },
                ],
            }
        ],
    )
    empty = _otlp("t2", [{"spanId": "b", "name": "GET /", "attributes": []}])
    upload = SimpleUploadedFile("mixed.jsonl", f"{good}\n{empty}\n".encode())
    before = row_counts()
    with pytest.raises(TraceImportError) as e:
        traces_import(project=project, paths_or_files=[upload])
    assert str(e.value).startswith("mixed.jsonl, record 2: otlp: trace t2: no content in its 1 span(s)")
    assert row_counts() == before


def test_an_explicit_span_format_on_a_file_of_another_shape_is_refused(project, import_fixtures, row_counts):
    before = row_counts()
    with pytest.raises(
        TraceImportError, match=r"langfuse_trace.json, record 1: OTLP/JSON: record has no 'resourceSpans'"
    ):
        traces_import(project=project, paths_or_files=[import_fixtures / "langfuse_trace.json"], format="otlp")
    assert row_counts() == before


def test_a_span_file_of_garbage_json_is_refused(project, row_counts):
    upload = SimpleUploadedFile("broken.json", io.BytesIO(b'{"resourceSpans": [{"scopeSpans": [').read())
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"^broken.json: invalid JSON"):
        traces_import(project=project, paths_or_files=[upload])
    assert row_counts() == before


def test_the_span_demo_seeds_every_span_format_once(project, manager):
    from annotations.demo import DemoContext
    from traces.importing.demo_spans import seed

    ctx = DemoContext(project=project, users={"manager": manager})
    seed(ctx)
    seed(ctx)
    formats = sorted(Trace.objects.filter(project=project).values_list("format", flat=True))
    assert formats == ["langfuse", "langsmith", "openai_agents", "openinference", "openinference", "otlp", "trail"]
    assert Trace.objects.filter(project=project, steps__parent_index__isnull=False).distinct().count() == 7
    assert ctx.log[-1].startswith("Span traces: 0 imported, 7 already there")
