"""AdaMAST's input records (adamast/core/trace_formats.py: trace_id, task, messages, outcome,
metadata), its raw_trajectory as role-labelled turns, and content parts: one trace per record,
one step per message or turn, the outcome kept, nothing invented."""

from __future__ import annotations

import json

import pytest

from traces.parsers import ParseError, detect_format, parse_traces

# the shape of AdaMAST's own example (adamast/examples/traces.jsonl), with a tool call and parts
RECORDS = [
    {
        "trace_id": "demo-1",
        "task": "Return the final calculation",
        "messages": [
            {"role": "user", "content": "What is 17 * 8?"},
            {
                "role": "assistant",
                "name": "calculator",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "mul", "arguments": '{"a": 17}'}}],
            },
            {"role": "tool", "content": "136"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "17 * 8 = 126."},
                    {"type": "image_url", "image_url": {"url": "https://x/chart.png"}},
                ],
            },
        ],
        "outcome": {"status": "failure", "score": 0.0},
        "metadata": {"system": "demo-calculator"},
    },
    {
        "trace_id": "demo-2",
        "task": "Return the final calculation",
        "messages": [{"role": "user", "content": "What is 9 * 7?"}, {"role": "assistant", "content": "9 * 7 = 63."}],
        "outcome": {"status": "success", "score": 1.0},
        "metadata": {"system": "demo-calculator"},
    },
]


def jsonl(rows) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def test_message_records_are_one_trace_each_with_every_message_and_the_outcome():
    text = jsonl(RECORDS)
    assert detect_format(text, filename="traces.jsonl") == "adamast"
    first, second = parse_traces(text, filename="traces.jsonl")
    assert [t.external_id for t in (first, second)] == ["demo-1", "demo-2"]
    assert [t.outcome for t in (first, second)] == ["failure", "success"]
    assert first.task == "Return the final calculation"
    assert first.metadata["adamast_metadata"] == {"system": "demo-calculator"}
    assert first.metadata["adamast_outcome"] == {"status": "failure", "score": 0.0}
    assert [(s.agent, s.kind) for s in first.steps] == [
        ("user", "message"),
        ("calculator", "tool_call"),
        ("tool", "tool_output"),
        ("assistant", "message"),
    ]
    assert 'call mul({"a": 17})' in first.steps[1].content
    assert first.steps[3].content.endswith("17 * 8 = 126.\n[image: https://x/chart.png]")
    assert not any("unknown" in s.content for t in (first, second) for s in t.steps)


@pytest.mark.parametrize(
    "trajectory",
    [
        'user: What is the capital of France?\n\ntool: search("capital of France") -> Paris\n\nassistant: Paris.',
        # AdaMAST's own rendering of a message list (_format_messages)
        "[USER]\nWhat is the capital of France?\n\n[ASSISTANT TOOL CALL] search({})\n\n[TOOL]\nParis\n\n"
        "[ASSISTANT:planner]\nParis.",
    ],
)
def test_a_raw_trajectory_of_turns_is_one_step_per_turn(trajectory):
    rec = {"problem_id": "p1", "task": "Capital", "raw_trajectory": trajectory, "metadata": {}}
    (trace,) = parse_traces(jsonl([rec]), filename="t.jsonl")
    assert trace.metadata["inner_format"] == "turns"
    kinds = [s.kind for s in trace.steps]
    assert kinds[0] == "message" and "tool_output" in kinds and trace.steps[-1].content.endswith("Paris.")
    assert len(trace.steps) == trajectory.count("\n\n") + 1
    lines = trace.raw_text.split("\n")
    for s in trace.steps:  # steps are exact line ranges of the text as given
        assert s.content == "\n".join(lines[s.line_start - 1 : s.line_end])


def test_plain_prose_stays_plain_text():
    rec = {"problem_id": "p1", "task": "t", "raw_trajectory": "The agent tried.\n\nThen it stopped.", "metadata": {}}
    (trace,) = parse_traces(jsonl([rec]), filename="t.jsonl")
    assert trace.metadata["inner_format"] == "plaintext"


def test_records_of_another_shape_are_refused_not_stored_as_unknown_steps():
    text = jsonl([{"id": 1, "score": 3}, {"id": 2, "score": 4}])
    with pytest.raises(ParseError, match=r"message 1 has no role, name or content \(keys: id, score\)"):
        parse_traces(text, filename="scores.jsonl")
