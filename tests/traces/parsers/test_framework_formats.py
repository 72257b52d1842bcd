"""Agent-framework JSON formats (issue 17) on fixtures written for the project: agents, kinds,
content, model, tokens and timing; and the inputs each refuses, naming the format and what is missing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest_paths import FIXTURES as ALL_FIXTURES
from traces.parsers import ParseError, detect_format, parse_trace, parse_traces

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _one(name: str):
    trace = parse_trace(_read(name), filename=name)
    for st in trace.steps:  # every step's content is exactly its lines of the stored text
        lines = trace.raw_text.split("\n")[st.line_start - 1 : st.line_end]
        assert "\n".join(lines) == st.content
    return trace


def test_claude_session_keeps_blocks_subagent_tools_and_usage() -> None:
    t = _one("claude_session.jsonl")
    assert (t.format, t.mas_name, t.llm_name) == ("claude", "Claude Code", "claude-sonnet-4-5-20250929")
    assert t.external_id == "7f3c2a10-5b8e-4c1d-9a7e-2d4f6b8c0e11"
    assert Counter(s.agent for s in t.steps) == {"Claude": 13, "test-finder": 4, "user": 2}
    assert Counter(s.kind for s in t.steps) == {"message": 9, "tool_call": 5, "tool_output": 5}
    first = t.steps[1]
    assert "### Claude (thinking)" in first.content and "sniffer probably only tries commas" in first.content
    assert first.details == {
        "model": "claude-sonnet-4-5-20250929",
        "input_tokens": 4120,
        "output_tokens": 96,
        "timestamp": "2026-11-30T09:11:05.120Z",
    }
    assert "output_tokens" not in t.steps[2].details  # one usage per API message, not per block
    sub = [s for s in t.steps if s.agent == "test-finder"]
    assert sub[1].kind == "tool_call" and 'call Bash({"command": "grep -rn sniff tests/ | head"})' in sub[1].content
    assert sub[1].details["model"] == "claude-haiku-4-5"
    failed = next(s for s in t.steps if "FAILED test_sniffer" in s.content)
    assert (failed.agent, failed.kind) == ("Claude", "tool_output")
    assert "### Claude (tool result: Bash (error))" in failed.content
    assert t.task.startswith("csvstat crashes on semicolon-separated files")
    assert t.metadata["summaries"] == ["Fix csvkit sniffer on semicolon files"]


def test_autogen_taskresult_takes_agents_from_source() -> None:
    t = _one("autogen_taskresult.json")
    assert (t.format, t.mas_name) == ("autogen", "AG2")
    assert Counter(s.agent for s in t.steps) == {
        "PlanningAgent": 5,
        "WebSearchAgent": 3,
        "DataAnalystAgent": 3,
        "user": 1,
        "MaxMessageTermination": 1,
    }
    call, result, summary = t.steps[2:5]
    assert (
        call.kind == "tool_call"
        and 'call search_web_tool({"query": "2025 Tour de France stage winners list"})' in call.content
    )
    assert call.details == {"input_tokens": 402, "output_tokens": 22}
    assert result.kind == "tool_output" and "M. Skjelmose (DEN)" in result.content
    assert summary.kind == "tool_output" and "(tool summary)" in summary.content
    err = t.steps[7]
    assert "[percentage_change_tool error] Error: percentage_change_tool needs start and end values" in err.content
    assert "### PlanningAgent (handoff -> user)" in t.steps[10].content
    assert t.steps[-1].kind == "system" and t.metadata["stop_reason"].startswith("Maximum number of messages")
    assert t.steps[0].details == {"timestamp": "2026-11-29T14:00:00Z"}


def test_autogen_without_sources_is_refused_not_imported_as_unknown() -> None:
    data = json.dumps(
        {"messages": [{"content": "hi", "type": "TextMessage"}, {"content": "yo", "type": "TextMessage"}]}
    )
    with pytest.raises(
        ParseError, match=r"x.json: read as AutoGen TaskResult: no message names its agent \('source'\)"
    ):
        parse_trace(data, filename="x.json")


def test_smolagents_memory_of_two_agents_in_time_order() -> None:
    t = _one("smolagents_memory.json")
    assert (t.format, t.mas_name, t.llm_name) == ("smolagents", "smolagents", "Qwen/Qwen2.5-Coder-32B-Instruct")
    assert Counter(s.agent for s in t.steps) == {"manager": 12, "web_agent": 15, "user": 3}
    # the manager's call to web_agent (step 1, t=1004) is followed by its observations, then by
    # web_agent's task and steps (t=1006...), then the manager's step 2 (t=1030): by start time
    first_call = next(i for i, s in enumerate(t.steps) if s.kind == "tool_call" and "web_agent" in s.content)
    agents = [s.agent for s in t.steps[first_call : first_call + 5]]
    assert agents == ["manager", "manager", "user", "web_agent", "web_agent"]
    error = next(s for s in t.steps if "(error)" in s.content)
    assert error.kind == "tool_output" and "HTTPError 429" in error.content and error.agent == "web_agent"
    plan = next(s for s in t.steps if "(plan)" in s.content)
    assert plan.details == {"input_tokens": 800, "output_tokens": 90, "timestamp": "1000.0", "duration_ms": 3000.0}
    final = [s for s in t.steps if "(final answer)" in s.content]
    assert final[-1].agent == "manager" and final[-1].content.endswith("174")
    assert t.task.startswith("How many years passed")


def test_langgraph_supervisor_names_agents_and_tool_results() -> None:
    t = _one("langgraph_supervisor.json")
    assert (t.format, t.mas_name, t.llm_name) == ("langchain", "LangGraph", "gpt-4o-2024-08-06")
    assert Counter(s.agent for s in t.steps) == {"supervisor": 5, "research_expert": 5, "math_expert": 7, "user": 1}
    assert Counter(s.kind for s in t.steps) == {"message": 4, "tool_call": 7, "tool_output": 7}
    err = next(s for s in t.steps if "unexpected keyword" in s.content)
    assert err.agent == "math_expert" and "(tool result: divide (error))" in err.content
    assert t.metadata == {"source_format": "json", "remaining_steps": 12}


def test_langchain_messages_to_dict_and_role_styles() -> None:
    data = [
        {"type": "human", "data": {"content": "2+2?", "type": "human"}},
        {
            "type": "ai",
            "data": {"content": "", "type": "ai", "tool_calls": [{"name": "calc", "args": {"e": "2+2"}, "id": "c1"}]},
        },
        {"type": "tool", "data": {"content": "4", "type": "tool", "tool_call_id": "c1", "name": "calc"}},
        {"role": "assistant", "content": "4", "response_metadata": {"model_name": "m1"}},
    ]
    t = parse_trace(json.dumps(data), filename="lc.json")
    assert t.format == "langchain"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "message"),
        ("assistant", "tool_call"),
        ("assistant", "tool_output"),
        ("assistant", "message"),
    ]
    assert t.steps[3].details == {"model": "m1"}


def test_docent_runs_one_trace_per_run_one_agent_per_transcript() -> None:
    (t,) = parse_traces(_read("docent_agent_runs.json"), filename="docent_agent_runs.json")
    assert (t.format, t.llm_name, t.benchmark, t.external_id, t.outcome) == (
        "docent",
        "gpt-4.1-mini",
        "GSM8K",
        "b5e1c7d2-debate-0001",
        "success",
    )
    assert Counter(s.agent for s in t.steps) == {"critic": 6, "proponent": 4, "user": 4, "": 1}
    assert "[reasoning] 18 / 3 = 6 groups." in t.steps[2].content
    broken = next(s for s in t.steps if "never closed" in s.content)
    assert (
        broken.agent == "critic" and broken.kind == "tool_output" and "(tool result: python (error))" in broken.content
    )


def test_adamast_jsonl_is_one_trace_per_record_with_its_metadata() -> None:
    traces = parse_traces(_read("adamast.jsonl"), filename="adamast.jsonl")
    assert [t.external_id for t in traces] == ["programdev-v2-17", "gsm-plus-88", "gaia-val-5"]
    assert [t.format for t in traces] == ["adamast"] * 3
    assert [t.metadata["inner_format"] for t in traces] == ["chatdev", "ag2", "autogen"]
    assert [(t.mas_name, t.llm_name, t.benchmark) for t in traces] == [
        ("ChatDev", "GPT-4o", "ProgramDev-v2"),
        ("AG2", "Qwen2.5-72B", "GSM-Plus"),
        ("Magentic-One", "gpt-4o", ""),
    ]
    assert traces[0].metadata["mast_annotation"] == {"1.1": 0, "1.3": 1, "3.2": 1}
    assert "Programmer" in {s.agent for s in traces[0].steps}
    assert traces[1].task == "A train leaves at 3 pm ..."


def test_adamast_record_without_trajectory_is_refused_with_its_record() -> None:
    text = json.dumps({"problem_id": "a", "task": "t", "raw_trajectory": "hello", "metadata": {}}) + "\n"
    text += json.dumps({"problem_id": "b", "task": "t", "raw_trajectory": "", "metadata": {}}) + "\n"
    with pytest.raises(
        ParseError,
        match=r"a.jsonl, record 2: read as AdaMAST JSONL: record has no 'messages', 'trajectory' or 'raw_trajectory'",
    ):
        parse_traces(text, filename="a.jsonl")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("claude_session.jsonl", "claude"),
        ("autogen_taskresult.json", "autogen"),
        ("smolagents_memory.json", "smolagents"),
        ("langgraph_supervisor.json", "langchain"),
        ("docent_agent_runs.json", "docent"),
        ("adamast.jsonl", "adamast"),
    ],
)
def test_formats_are_detected_from_their_keys(name: str, fmt: str) -> None:
    assert detect_format(_read(name), filename=name) == fmt


def test_json_of_non_objects_is_refused_with_the_record() -> None:
    with pytest.raises(ParseError, match=r"not_objects.json, record 1: record is null, expected an object"):
        parse_trace(_read("not_objects.json"), filename="not_objects.json")


def test_json_file_that_is_not_json_is_refused_unless_plaintext_is_asked_for() -> None:
    with pytest.raises(ParseError, match=r"not_json.json, line 1: invalid JSON"):
        parse_trace(_read("not_json.json"), filename="not_json.json")
    assert parse_trace(_read("not_json.json"), filename="not_json.json", format="plaintext").format == "plaintext"


def test_messages_with_no_content_are_refused() -> None:
    data = json.dumps({"messages": [{"source": "a", "type": "TextMessage", "content": ""}]})
    with pytest.raises(ParseError, match="read as AutoGen TaskResult: no message has any content"):
        parse_trace(data, filename="empty.json")


def test_smolagents_benchmark_output_is_one_trace_per_task_with_every_message():
    """examples/smolagents_benchmark/run.py: one JSON line per task, intermediate_steps as
    write_memory_to_messages() dicts (content parts, tool-call / tool-response roles)."""
    name = "smolagents_benchmark.jsonl"
    assert detect_format(_read(name), filename=name) == "smolagents_run"
    code, tools, vanilla = parse_traces(_read(name), filename=name)
    assert [t.llm_name for t in (code, tools, vanilla)] == ["Qwen/Qwen2.5-Coder-32B-Instruct"] * 2 + ["gpt-4o"]
    assert [t.benchmark for t in (code, tools, vanilla)] == ["MATH", "SimpleQA", "GAIA"]
    assert code.task == "What is 2+2?" and code.metadata["true_answer"] == "4"
    assert code.metadata["token_counts"] == {"input": 1234, "output": 56}
    assert [(s.agent, s.kind) for s in code.steps] == [
        ("CodeAgent", "system"),
        ("user", "message"),
        ("CodeAgent", "message"),
        ("CodeAgent", "tool_call"),
        ("tool", "tool_output"),
    ]
    assert "final_answer(2+2)" in code.steps[2].content and "Last output from code snippet:\n4" in code.steps[4].content
    assert [(s.agent, s.kind) for s in tools.steps] == [
        ("user", "message"),
        ("ToolCallingAgent", "tool_call"),
        ("tool", "tool_output"),
    ]
    assert 'call web_search({"query": "capital of France"})' in tools.steps[1].content
    assert [s.content for s in vanilla.steps] == ["### model (assistant)\nhi"]
    assert not any("unknown" in s.content for t in (code, tools, vanilla) for s in t.steps)


def test_a_failed_smolagents_task_with_no_steps_is_refused_naming_the_record():
    rec = {"model_id": "m", "question": "q", "true_answer": "a", "answer": "Timeout", "intermediate_steps": []}
    with pytest.raises(ParseError, match=r"b.jsonl, record 1: .* no intermediate steps \(the run failed: Timeout\)"):
        parse_traces(json.dumps(rec) + "\n", filename="b.jsonl")


def _langgraph_states() -> tuple[dict, list]:
    state = json.loads(_read("langgraph_thread_state.json"))
    history = [
        {**state, "values": {"messages": state["values"]["messages"][:k]}, "next": ["agent"] if k < 4 else []}
        for k in (4, 2, 1)  # get_state_history: newest first
    ]
    return state, history


@pytest.mark.parametrize("shape", ["snapshot", "history", "tuple", "checkpoint"])
def test_a_langgraph_thread_state_is_read_for_its_messages(shape):
    """A get_state() snapshot / the API's thread state, the state history, the snapshot dumped as a
    tuple, and a checkpointer's checkpoint all give the thread's four messages."""
    state, history = _langgraph_states()
    obj = {
        "snapshot": state,
        "history": history,
        "tuple": [state["values"], [], {"configurable": {"thread_id": "th-1"}}, {"step": 3}, "2025-01-01"],
        "checkpoint": {"v": 1, "id": "1ef", "channel_values": state["values"], "channel_versions": {}},
    }[shape]
    text = json.dumps(obj)
    assert detect_format(text, filename="state.json") == "langchain"
    trace = parse_trace(text, filename="state.json")
    assert [(s.agent, s.kind) for s in trace.steps] == [
        ("user", "message"),
        ("weather_agent", "tool_call"),
        ("weather_agent", "tool_output"),
        ("weather_agent", "message"),
    ]
    assert trace.task == "What's the weather in SF?" and trace.llm_name == "gpt-4o"
    if shape == "history":
        assert trace.metadata["checkpoints"] == 3
    if shape in ("snapshot", "tuple"):
        assert trace.metadata["thread_id"] == "th-1"


@pytest.mark.parametrize("text", ["[" * 200_000 + "]" * 200_000, '{"a":' * 200_000 + "1" + "}" * 200_000])
def test_json_nested_200000_levels_deep_is_bad_input_naming_the_file(text):
    with pytest.raises(ParseError, match=r"deep.json, line 1: invalid JSON: nested too deeply"):
        parse_traces(text, filename="deep.json")


def test_who_and_when_magentic_one_roles_name_the_agent_and_its_addressee():
    record = {
        "question": "How many stops?",
        "history": [
            {"role": "human", "content": "How many stops?"},
            {"role": "Orchestrator (thought)", "content": "We need the timetable."},
            {"role": "Orchestrator (-> WebSurfer)", "content": "Open the line's timetable."},
            {"role": "WebSurfer", "content": "The line has 12 stops."},
        ],
        "mistake_agent": "WebSurfer",
        "mistake_step": "3",
    }
    (trace,) = parse_traces(json.dumps(record), filename="whowhen.json")
    rows = [(s.agent, s.recipient) for s in trace.steps]
    assert rows == [("human", ""), ("Orchestrator", ""), ("Orchestrator", "WebSurfer"), ("WebSurfer", "")]
    assert "Orchestrator (-> WebSurfer)" in trace.steps[2].content  # the text keeps the addressee


def test_smolagents_manager_memory_names_its_managed_agents():
    """A CodeAgent manager's memory (agent.memory.get_full_steps()): it calls its managed agent in
    code, and the agent's answer comes back in the observations through smolagents' managed-agent
    report template."""
    report = (
        "Execution logs:\nHere is the final answer from your managed agent 'search_agent':\n"
        "### 1. Task outcome (short version):\nThe Eiffel Tower is 330 m tall.\n"
        "\nLast output from code snippet:\nNone"
    )
    memory = [
        {"system_prompt": "You are an expert assistant who can solve any task using code blobs."},
        {"task": "How tall is the Eiffel Tower?"},
        {
            "step_number": 1,
            "model_output": "Thought: ask my search agent.\n<code>search_agent(task='Eiffel Tower height')</code>",
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "python_interpreter", "arguments": "search_agent(task='Eiffel Tower height')"}}
            ],
            "observations": report,
            "timing": {"start_time": 1.0, "end_time": 9.0},
            "token_usage": {"input_tokens": 900, "output_tokens": 40},
        },
        {
            "step_number": 2,
            "model_output": "<code>final_answer('330 m')</code>",
            "tool_calls": [{"id": "call_2", "type": "function",
                            "function": {"name": "python_interpreter", "arguments": "final_answer('330 m')"}}],
            "observations": "Execution logs:\nLast output from code snippet:\n330 m",
            "is_final_answer": True,
            "action_output": "330 m",
        },
    ]  # fmt: skip
    (trace,) = parse_traces(json.dumps(memory), filename="manager_memory.json")
    agents = {s.agent for s in trace.steps}
    assert "search_agent" in agents
    call = next(s for s in trace.steps if s.kind == "tool_call" and "search_agent(" in s.content)
    assert (call.agent, call.recipient) == ("agent", "search_agent")
    answer = next(s for s in trace.steps if s.agent == "search_agent")
    assert answer.recipient == "agent" and "330 m tall" in answer.content
    plain = next(s for s in trace.steps if s.kind == "tool_call" and "final_answer" in s.content)
    assert plain.recipient == ""


def test_a_message_that_names_no_one_gets_no_invented_speaker():
    (trace,) = parse_traces(json.dumps([{"content": "a line with no speaker"}, {"role": "user", "content": "hi"}]),
                            filename="anon.json")  # fmt: skip
    assert trace.steps[0].content == "a line with no speaker"
    assert "unknown" not in trace.raw_text


def test_appworld_requests_and_replies_name_their_addressee():
    trace = parse_trace((ALL_FIXTURES / "traces" / "appworld_tiny.txt").read_text(), filename="appworld_tiny.txt")
    addressed = [(s.agent, s.recipient) for s in trace.steps if s.recipient]
    assert ("Supervisor", "spotify Agent") in addressed
    assert ("spotify Agent", "Supervisor") in addressed
    assert all(s.recipient == "" for s in trace.steps if s.kind != "message")


def test_magentic_one_log_jsonl_names_the_agent_and_its_addressee():
    """autogen-magentic-one's LogHandler writes log.jsonl: the agent and its addressee in `source`."""
    rows = [
        {"source": "Orchestrator (thought)", "message": "Initial plan: ask WebSurfer.", "type": "OrchestrationEvent",
         "timestamp": "2024-11-05T10:00:00"},
        {"source": "Orchestrator (-> WebSurfer)", "message": "Search the 1977 Yankees roster.",
         "type": "OrchestrationEvent", "timestamp": "2024-11-05T10:00:01"},
        {"source": "WebSurfer", "message": "I typed '1977 Yankees roster' into the search bar.",
         "type": "OrchestrationEvent", "timestamp": "2024-11-05T10:00:05"},
    ]  # fmt: skip
    (trace,) = parse_traces("\n".join(json.dumps(r) for r in rows), filename="log.jsonl")
    assert [(s.agent, s.recipient) for s in trace.steps] == [
        ("Orchestrator", ""), ("Orchestrator", "WebSurfer"), ("WebSurfer", ""),
    ]  # fmt: skip
    assert "Search the 1977 Yankees roster." in trace.steps[1].content
