"""Span formats: each fixture becomes steps with the right agents, kinds, content, model, tokens and parents."""

from __future__ import annotations

import io
import json

import pytest

from tests.conftest_paths import FIXTURES
from traces.parsers import ParseError, detect_format, parse_trace
from traces.parsers.registry import span_format
from traces.parsers.spans import parse_trail

IMPORT = FIXTURES / "import"


def read(name: str, fmt: str | None = None):
    path = IMPORT / name
    fmt = fmt or detect_format(path.read_text(), filename=name)
    return fmt, list(span_format(fmt).read(io.BytesIO(path.read_bytes()), filename=name))


def agents(trace) -> list[str]:
    seen: list[str] = []
    for st in trace.steps:
        if st.agent not in seen:
            seen.append(st.agent)
    return seen


def step(trace, agent: str, kind: str, text: str):
    """The one step of this agent and kind whose content holds text."""
    found = [s for s in trace.steps if s.agent == agent and s.kind == kind and text in s.content]
    assert len(found) == 1, (agent, kind, text, [(s.agent, s.kind, s.content[:60]) for s in trace.steps])
    return found[0]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("otlp_genai.jsonl", "otlp"),
        ("otlp_indexed.json", "otlp"),
        ("phoenix_spans.jsonl", "openinference"),
        ("trail_trace.json", "trail"),
        ("langfuse_trace.json", "langfuse"),
        ("langsmith_runs.json", "langsmith"),
        ("openai_agents_trace.json", "openai_agents"),
    ],
)
def test_each_span_fixture_is_detected_and_has_ten_steps_with_parents(name, fmt):
    detected, traces = read(name)
    assert detected == fmt
    trace = traces[0]
    assert trace.format == fmt and len(trace.steps) >= 10
    assert {s.kind for s in trace.steps} >= {"system", "tool_call", "tool_output", "message"}
    # every parent is an earlier step; tool outputs hang under their call
    for s in trace.steps:
        assert s.parent is None or 0 <= s.parent < s.index
        if s.kind == "tool_output":
            assert trace.steps[s.parent].kind == "tool_call"
    # steps are blocks of the rendered text, lines counted as everywhere else
    lines = trace.raw_text.split("\n")
    for s in trace.steps:
        assert "\n".join(lines[s.line_start - 1 : s.line_end]) == s.content


def test_otlp_genai_current_conventions():
    _fmt, (trace,) = read("otlp_genai.jsonl")
    assert agents(trace) == ["Orchestrator", "user", "Researcher", "Analyst"]
    assert trace.external_id == "5b8efff798038103d269b633813fc60c"
    assert trace.task.startswith("What was the population of Lyon in 2023")
    orch = step(trace, "Orchestrator", "system", "Orchestrator invoked")
    res = step(trace, "Researcher", "system", "Researcher invoked")
    assert (orch.parent, res.parent) == (None, orch.index)
    call = step(trace, "Researcher", "tool_call", "call web_search(")
    out = step(trace, "Researcher", "tool_output", "INSEE - Lyon (69123)")
    assert (call.parent, out.parent) == (res.index, call.index)
    assert (call.model, call.input_tokens, call.output_tokens, call.duration_ms) == ("gpt-4o-mini", 230, 31, 1300)
    assert call.started_at == "2025-12-01T12:00:02.200000Z"
    final = trace.steps[-1]
    assert (final.agent, final.kind, final.model) == ("Orchestrator", "message", "gpt-4o")
    assert "up 21,535 (+4.30%)" in final.content
    # the Researcher's second call resent the first exchange: shown once
    asked = [s for s in trace.steps if s.agent == "user" and "Lyon population 2023 and 2013, with sources" in s.content]
    assert len(asked) == 1
    assert trace.metadata["repeated_inputs_hidden"] == 7
    assert trace.metadata["tokens"] == {"input": 3152, "output": 279}
    assert trace.mas_name == "OpenAI Agents SDK"  # from the instrumentation scope


def test_otlp_indexed_prompt_attributes_events_and_errors():
    _fmt, (trace,) = read("otlp_indexed.json")
    assert agents(trace) == ["Researcher", "user", "Analyst"]
    assert trace.mas_name == "CrewAI" and trace.llm_name == "gpt-4-turbo"
    step(trace, "Researcher", "system", "You are the Researcher")
    call = step(trace, "Researcher", "tool_call", "call fetch_page(")
    failed = step(trace, "Researcher", "tool_output", "error: TimeoutError: www.insee.fr did not answer")
    assert failed.parent == call.index
    # the events-style call: its choice event is the answer, with the call's tokens
    answer = step(trace, "Researcher", "message", "I assume about 491,000")
    assert (answer.input_tokens, answer.output_tokens) == (610, 41)
    assert step(trace, "Analyst", "tool_output", "32000").parent == step(trace, "Analyst", "tool_call", "523000").index


def test_phoenix_jsonl_holds_two_traces_and_keeps_the_error():
    _fmt, traces = read("phoenix_spans.jsonl")
    assert [t.external_id for t in traces] == ["6c80880dbeb609e2ed41e06a6397a0dd", "77a3d2c1e0f94b5aa1c2d3e4f5061728"]
    first, second = traces
    assert agents(first) == ["Supervisor", "Researcher", "Analyst"]
    assert first.metadata["session"] == "sess-42"
    py = step(first, "Analyst", "tool_call", "call python(")
    assert (py.model, py.input_tokens, py.output_tokens) == ("gpt-4o", 300, 40)
    assert "error: RecursionError: agent loop exceeded 25 steps" in second.steps[-1].content


def test_trail_nested_child_spans_and_its_entry_point():
    _fmt, (trace,) = read("trail_trace.json")
    assert agents(trace) == ["manager", "search_agent", "user"]  # smolagents shows observations as user messages
    step(trace, "user", "message", "Error: HTTPError 403: Forbidden")
    assert (trace.mas_name, trace.benchmark, trace.external_id) == ("smolagents", "TRAIL", "trail-0042")
    sub = step(trace, "search_agent", "system", "search_agent invoked")
    assert trace.steps[sub.parent].agent == "manager"
    forbidden = step(trace, "search_agent", "tool_output", "error: HTTPError 403: Forbidden")
    assert trace.steps[forbidden.parent].content.endswith(
        'call visit_page({"url": "https://www.insee.fr/fr/statistiques/2011101"})'
    )
    # the Parquet rows' entry point: the same trace from a dict or its JSON text
    obj = json.loads((IMPORT / "trail_trace.json").read_text())
    assert [s.content for s in parse_trail(obj).steps] == [s.content for s in trace.steps]
    assert parse_trail(json.dumps(obj), record=4).external_id == "trail-0042"


def test_langfuse_generations_tools_and_events():
    _fmt, (trace,) = read("langfuse_trace.json")
    assert agents(trace) == ["Planner", "Researcher", "Analyst"]
    assert trace.benchmark == "GAIA" and trace.metadata["tags"] == ["gaia", "level-1"]
    call = step(trace, "Researcher", "tool_call", "call web_search(")
    assert (call.model, call.input_tokens, call.output_tokens) == ("claude-3-5-haiku-20241022", 260, 25)
    assert step(trace, "Researcher", "tool_output", "INSEE").parent == call.index
    assert step(trace, "Researcher", "system", "cache-miss").kind == "system"


def test_langsmith_run_tree_with_langgraph_nodes():
    _fmt, (trace,) = read("langsmith_runs.json")
    assert agents(trace) == ["supervisor", "user", "researcher", "analyst"]
    assert trace.mas_name == "LangChain"
    call = step(trace, "researcher", "tool_call", "call web_search(")
    assert (call.input_tokens, call.output_tokens, call.model) == (250, 20, "gpt-4o-mini")
    assert step(trace, "researcher", "tool_output", "INSEE").parent == call.index
    assert step(trace, "supervisor", "message", "FINISH").kind == "message"


def test_openai_agents_sdk_handoffs_guardrails_and_tool_errors():
    _fmt, (trace,) = read("openai_agents_trace.json")
    assert agents(trace) == ["Triage", "user", "Researcher", "Analyst"]
    assert (trace.mas_name, trace.benchmark, trace.llm_name) == ("OpenAI Agents SDK", "GAIA", "gpt-4.1")
    assert trace.metadata["workflow"] == "Lyon population"
    step(trace, "Triage", "system", "handoff: Triage -> Researcher")
    step(trace, "Triage", "system", "guardrail no_personal_data: passed")
    err = step(trace, "Analyst", "tool_output", "ModuleNotFoundError: No module named 'pandas'")
    assert trace.steps[err.parent].kind == "tool_call"


def test_a_trace_without_content_is_refused_naming_file_record_and_format():
    line = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "t1",
                                "spanId": "s1",
                                "name": "GET /health",
                                "attributes": [{"key": "http.method", "value": {"stringValue": "GET"}}],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    data = (json.dumps(line) + "\n").encode()
    with pytest.raises(ParseError) as e:
        list(span_format("otlp").read(io.BytesIO(data), filename="health.jsonl"))
    assert str(e.value).startswith("health.jsonl, record 1: otlp: trace t1: no content in its 1 span(s)")
    assert "gen_ai.input.messages" in str(e.value)


def test_a_trace_where_no_step_has_an_agent_is_refused():
    record = {
        "name": "x",
        "context": {"trace_id": "t9", "span_id": "a"},
        "parent_id": None,
        "attributes": {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "hello"},
    }
    # an output with no role, in a trace with no agent span: nobody is named
    record["attributes"]["llm.output_messages.0.message.role"] = ""
    text = json.dumps(record) + "\n"
    trace = parse_trace(text, format="openinference")  # an answer's role defaults to "assistant"
    assert trace.steps[0].agent == "assistant"
    record["attributes"] = {"openinference.span.kind": "CHAIN", "input.value": "just text"}
    with pytest.raises(ParseError, match="every step's agent is unknown"):
        parse_trace(json.dumps(record) + "\n", format="openinference", filename="f.jsonl")


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("otlp", "[1, 2]", "record 1: OTLP/JSON: record is int, expected an object"),
        ("otlp", '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a"}]}]}]}', "has no traceId/spanId"),
        ("openinference", '{"name": "a"}\n{"name": "b"}\n', "record 1: OpenInference: record is not a span"),
        ("langfuse", '{"id": "t", "observations": [3]}', "observation 1 is int"),
        ("openai_agents", '{"object": "trace.span", "id": "s", "trace_id": "t"}', "needs id, trace_id and span_data"),
        ("trail", '{"spans": "no"}', "TRAIL: record has no 'spans' list"),
        ("otlp", '{"resourceSpans": [', "invalid JSON"),
    ],
)
def test_malformed_span_files_are_refused_with_what_and_where(fmt, text, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        list(span_format(fmt).read(io.BytesIO(text.encode()), filename="bad.json"))
    assert str(e.value).startswith("bad.json")


def test_parse_trace_refuses_a_text_of_several_traces():
    with pytest.raises(ParseError, match="holds 2 traces where one was expected"):
        parse_trace((IMPORT / "phoenix_spans.jsonl").read_text(), format="openinference")


def test_smolagents_memory_with_observations_is_not_taken_for_langfuse():
    text = json.dumps([{"step_number": 1, "observations": "x", "model_output": "y"}])
    assert detect_format(text) != "langfuse"


def test_jsonl_lines_longer_than_a_read_chunk_are_read_as_lines():
    big = "x" * (3 * 1024 * 1024)
    spans = [
        {
            "traceId": f"t{n}",
            "spanId": "a",
            "name": "chat",
            "attributes": [
                {"key": "gen_ai.agent.name", "value": {"stringValue": "Writer"}},
                {
                    "key": "gen_ai.output.messages",
                    "value": {
                        "stringValue": json.dumps(
                            [{"role": "assistant", "parts": [{"type": "text", "content": f"{n} {big}"}]}]
                        )
                    },
                },
            ],
        }
        for n in range(2)
    ]
    lines = [json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [s]}]}]}) for s in spans]
    traces = list(span_format("otlp").read(io.BytesIO("\n".join(lines).encode()), filename="long.jsonl"))
    assert [t.external_id for t in traces] == ["t0", "t1"]
    assert traces[1].steps[0].content.startswith("### Writer (assistant)\n1 xxx")


def _chat_line(trace: str, span: str, parent: str, text: str) -> str:
    attrs = [
        {"key": "gen_ai.agent.name", "value": {"stringValue": "Writer"}},
        {
            "key": "gen_ai.output.messages",
            "value": {"stringValue": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])},
        },
    ]
    span_obj = {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": "chat", "attributes": attrs}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span_obj]}]}]})


def test_over_the_memory_budget_finished_traces_are_emitted_early(monkeypatch):
    from traces.parsers.spans import reader

    monkeypatch.setattr(reader, "_PENDING_CHARS", 5000)
    lines = [_chat_line(f"t{n}", "root", "", f"answer {n} " + "y" * 2000) for n in range(6)]
    traces = list(span_format("otlp").read(io.BytesIO("\n".join(lines).encode()), filename="many.jsonl"))
    assert [t.external_id for t in traces] == [f"t{n}" for n in range(6)]


def test_a_span_arriving_after_its_trace_was_emitted_is_refused_not_split(monkeypatch):
    from traces.parsers.spans import reader

    monkeypatch.setattr(reader, "_PENDING_CHARS", 5000)
    lines = [_chat_line("t0", "root", "", "first " + "y" * 2000)]
    lines += [_chat_line(f"u{n}", "root", "", f"other {n} " + "y" * 2000) for n in range(4)]
    lines.append(_chat_line("t0", "late", "root", "late child"))
    with pytest.raises(ParseError, match=r"^far.jsonl, record 6: span late of trace t0 comes long after"):
        list(span_format("otlp").read(io.BytesIO("\n".join(lines).encode()), filename="far.jsonl"))


def _ls_span(span_id: str, parent: str, name: str, kind: str, prompt: object, completion: object, **extra) -> dict:
    """A span as LangSmith's OpenTelemetry exporter (langsmith OTELExporter) writes it: the run's
    inputs and outputs as JSON strings in plain gen_ai.prompt / gen_ai.completion."""
    attrs = {"langsmith.span.kind": kind, "langsmith.trace.name": "weather agent", **extra}
    if prompt is not None:
        attrs["gen_ai.prompt"] = json.dumps(prompt)
    if completion is not None:
        attrs["gen_ai.completion"] = json.dumps(completion)
    return {
        "traceId": "ls1",
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + int(span_id[1:]) * 1000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def _lc(cls: str, content: str, **kw) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls],
            "kwargs": {"content": content, **kw}}  # fmt: skip


def test_langsmith_otel_exporter_content_in_plain_gen_ai_prompt_and_completion():
    node = {"langsmith.metadata.langgraph_node": "researcher"}
    call = {"name": "search", "args": {"q": "weather in Lyon"}, "id": "call_1", "type": "tool_call"}
    spans = [
        _ls_span("s1", "", "LangGraph", "chain", {"messages": [["user", "Weather in Lyon?"]]}, {"messages": []}),
        _ls_span("s2", "s1", "researcher", "chain", {"messages": []}, {"messages": []}, **node),
        _ls_span(
            "s3", "s2", "ChatOpenAI", "llm",
            {"messages": [[_lc("HumanMessage", "Weather in Lyon?")]]},
            {"generations": [[{"text": "", "message": _lc("AIMessage", "", tool_calls=[call])}]]},
            **node,
        ),  # fmt: skip
        _ls_span("s4", "s2", "search", "tool", {"input": "weather in Lyon"}, {"output": "Sunny, 21 C"}, **node),
        _ls_span(
            "s5", "s2", "ChatOpenAI", "llm",
            {"messages": [[_lc("HumanMessage", "Weather?"), _lc("ToolMessage", "Sunny", tool_call_id="call_1")]]},
            {"generations": [[{"text": "It is sunny in Lyon.", "message": _lc("AIMessage", "It is sunny in Lyon.")}]]},
            **node,
        ),  # fmt: skip
    ]
    data = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    (trace,) = list(span_format("otlp").read(io.BytesIO(data), filename="langsmith_otel.json"))

    assert "researcher" in agents(trace)
    calls = [s for s in trace.steps if s.kind == "tool_call" and "search" in s.content]
    assert calls and all(s.agent == "researcher" and "weather in Lyon" in s.content for s in calls)
    output = step(trace, "researcher", "tool_output", "Sunny, 21 C")
    assert trace.steps[output.parent].kind == "tool_call"
    step(trace, "researcher", "message", "It is sunny in Lyon.")
    assert all("unknown" not in s.content for s in trace.steps)


def test_langsmith_otel_exporter_plain_text_prompt_is_kept_as_written():
    spans = [_ls_span("s1", "", "answer", "llm", None, None)]
    spans[0]["attributes"] += [
        {"key": "gen_ai.prompt", "value": {"stringValue": "What is 2 + 2?"}},
        {"key": "gen_ai.completion", "value": {"stringValue": "4"}},
        {"key": "gen_ai.agent.name", "value": {"stringValue": "calculator"}},
    ]
    data = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    (trace,) = list(span_format("otlp").read(io.BytesIO(data), filename="plain.json"))
    texts = " ".join(s.content for s in trace.steps)
    assert "What is 2 + 2?" in texts and "4" in texts


def test_a_handoff_step_names_its_recipient():
    _fmt, (trace,) = read("openai_agents_trace.json")
    handoff = step(trace, "Triage", "system", "handoff: Triage -> Researcher")
    assert handoff.recipient == "Researcher"
    assert {s.recipient for s in trace.steps} == {"", "Researcher", "Analyst"}  # only the two handoffs name one


def _trail_span(span_id: str, name: str, kind: str, attrs: dict, children: list) -> dict:
    return {
        "span_id": span_id,
        "parent_span_id": None,
        "span_name": name,
        "span_kind": "Internal",
        "timestamp": f"2025-03-10T10:00:0{span_id[-1]}.000000Z",
        "duration": "PT1S",
        "status_code": "Unset",
        "span_attributes": {"openinference.span.kind": kind, **attrs},
        "child_spans": children,
    }


def test_trail_smolagents_run_spans_take_the_agents_names_from_their_attributes():
    """OpenInference's smolagents instrumentation names agent spans after the class
    (``CodeAgent.run``); the manager lists its managed agents, and a managed agent's task names it
    (smolagents' managed_agent task template)."""
    managed_task = (
        "You're a helpful agent named 'search_agent'.\nYou have been submitted this task by your manager.\n"
        "---\nTask:\nFind the tower's height.\n---"
    )
    answer = {"llm.output_messages.0.message.role": "assistant"}
    search = _trail_span("s3", "ToolCallingAgent.run", "AGENT", {"input.value": json.dumps({"task": managed_task})}, [
        _trail_span("s4", "LiteLLMModel.__call__", "LLM",
                    {**answer, "llm.output_messages.0.message.content": "It is 330 m tall."}, []),
    ])  # fmt: skip
    manager = _trail_span("s1", "CodeAgent.run", "AGENT", {
        "smolagents.task": "How tall is the Eiffel Tower?",
        "smolagents.managed_agents.0.name": "search_agent",
        "smolagents.managed_agents.0.description": "Searches the web.",
    }, [
        _trail_span("s2", "LiteLLMModel.__call__", "LLM",
                    {**answer, "llm.output_messages.0.message.content": "I will ask search_agent."}, []),
        search,
    ])  # fmt: skip
    trace = parse_trail({"trace_id": "trail-7", "spans": [manager]})
    names = agents(trace)
    assert "manager" in names and "search_agent" in names
    assert not any(n.endswith(".run") for n in names)
    step(trace, "search_agent", "message", "It is 330 m tall.")
