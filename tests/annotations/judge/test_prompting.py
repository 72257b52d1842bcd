"""annotations.judge.prompting: prompt building, the trace budget, tolerant answer parsing (pure)."""

import json

import pytest

from annotations.judge.prompting import (
    DEFAULT_TEMPLATE,
    AnswerError,
    FewShot,
    ModeIn,
    StepIn,
    build_messages,
    fill_template,
    parse_answer,
    render_trace,
    repair_messages,
    template_problems,
)

CODES = ["1.1", "1.2", "2.1"]
MODES = [
    ModeIn("1.1", "Disobey task specification", "Fails to follow the task.", "Example A"),
    ModeIn("1.2", "Disobey role specification", "Acts outside its role."),
    ModeIn("2.1", "Conversation reset", "Restarts the dialogue."),
]


def steps(n, size=100, agent_cycle=("Planner", "Coder")):
    return [StepIn(i, agent_cycle[i % len(agent_cycle)], "message", f"step {i} " + "x" * size) for i in range(n)]


def answer(**over):
    data = {
        "task_success": "no",
        "modes": [
            {"code": c, "present": c == "1.1", "evidence_steps": [1] if c == "1.1" else [], "rationale": f"r {c}."}
            for c in CODES
        ],
    }
    data.update(over)
    return json.dumps(data)


def test_short_trace_is_rendered_whole_with_step_numbers():
    text, info = render_trace(steps(3), max_chars=10_000)
    assert "[step 0] Planner:" in text and "[step 2] Planner:" in text
    assert not info.truncated and info.steps_kept == 3


def test_long_trace_keeps_start_end_and_salient_steps_within_budget():
    st = steps(200, size=200)
    st[100] = StepIn(100, "Coder", "message", "Traceback: AssertionError, the test failed")
    text, info = render_trace(st, max_chars=8_000)
    assert len(text) <= 8_000
    assert "[step 0]" in text and "[step 199]" in text
    assert "[step 100]" in text
    assert "steps omitted ...]" in text
    assert info.truncated and info.strategy == "head+tail+salient"
    assert info.steps_kept + info.steps_omitted == 200
    assert info.gaps and all(a <= b for a, b in info.gaps)


def test_elision_marker_counts_the_omitted_steps():
    text, info = render_trace(steps(50, size=500), max_chars=5_000)
    omitted = sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("[... ") and "step" in line)
    assert omitted == info.steps_omitted


def test_one_huge_step_is_shortened_in_the_middle():
    st = [StepIn(0, "A", "message", "HEAD" + "y" * 50_000 + "TAIL")]
    text, info = render_trace(st, max_chars=4_000)
    assert "HEAD" in text and "TAIL" in text and "characters omitted" in text
    assert info.steps_shortened == 1


def test_fill_template_leaves_braces_in_the_trace_alone():
    out = fill_template("A {trace} B {mode_codes}", {"trace": "code {definitions} {x}", "mode_codes": "1.1"})
    assert out == "A code {definitions} {x} B 1.1"


def test_build_messages_carries_definitions_codes_trace_and_few_shot():
    msgs, info = build_messages(
        template=DEFAULT_TEMPLATE, modes=MODES, steps=steps(2), few_shot=[FewShot("[step 0] A:\nhello", ["1.1"], CODES)]
    )
    prompt = msgs[-1]["content"]
    assert "Fails to follow the task." in prompt and "Example A" in prompt
    assert "one entry for each of these codes: 1.1, 1.2, 2.1" in prompt
    assert "[step 1] Coder:" in prompt
    assert "Agreed answer" in prompt


def test_template_without_trace_placeholder_is_refused():
    assert any("{trace}" in p for p in template_problems("Label this: {answer_format}"))
    assert any("unknown placeholder" in p for p in template_problems("{trace} {answer_format} {tracee}"))
    assert template_problems(DEFAULT_TEMPLATE) == []


def test_parse_plain_json():
    a = parse_answer(answer(), codes=CODES, valid_steps=range(5))
    assert [m.code for m in a.modes] == CODES
    assert a.modes[0].present and a.modes[0].evidence_steps == (1,)
    assert a.task_success == "no"


def test_parse_code_fence_with_leading_text_and_trailing_commas():
    raw = "Sure! Here is my analysis.\n```json\n" + answer()[:-2] + "],\n}\n```\nHope it helps."
    raw = raw.replace('"rationale": "r 2.1."}', '"rationale": "r 2.1.",}')
    a = parse_answer(raw, codes=CODES)
    assert len(a.modes) == 3


def test_parse_yes_no_strings_and_mode_dict():
    raw = json.dumps({"task_success": "unknown", "modes": {"1.1": {"present": "yes"}, "1.2": "no", "2.1": "No"}})
    a = parse_answer(raw, codes=CODES)
    assert [m.present for m in a.modes] == [True, False, False]


def test_missing_mode_is_rejected_whole():
    raw = json.dumps({"modes": [{"code": "1.1", "present": True}]})
    with pytest.raises(AnswerError, match="1.2, 2.1"):
        parse_answer(raw, codes=CODES)


def test_garbage_is_rejected_with_a_reason():
    with pytest.raises(AnswerError):
        parse_answer("I cannot help with that.", codes=CODES)
    with pytest.raises(AnswerError, match="empty"):
        parse_answer("   ", codes=CODES)


def test_evidence_outside_the_trace_is_dropped_with_a_warning():
    raw = answer().replace('"evidence_steps": [1]', '"evidence_steps": [1, 99, "step 2", "x"]')
    a = parse_answer(raw, codes=CODES, valid_steps=range(5))
    assert a.modes[0].evidence_steps == (1, 2)
    assert any("99" in w for w in a.warnings)


def test_odd_present_value_is_an_error():
    raw = answer().replace('"present": true', '"present": "maybe"')
    with pytest.raises(AnswerError, match="present"):
        parse_answer(raw, codes=CODES)


def test_repair_messages_send_the_error_back():
    msgs = repair_messages([{"role": "user", "content": "q"}], raw="oops", error="invalid JSON", codes=CODES)
    assert msgs[1] == {"role": "assistant", "content": "oops"}
    assert "invalid JSON" in msgs[2]["content"] and "1.1, 1.2, 2.1" in msgs[2]["content"]


def test_codes_of_a_revised_version_keep_their_letters():
    from annotations.judge.prompting import parse_answer

    raw = json.dumps({"modes": [{"code": "FM-1.2a", "present": True}, {"code": "1.2b Acting", "present": False}]})
    answer = parse_answer(raw, codes=["1.2a", "1.2b"])
    assert [(m.code, m.present) for m in answer.modes] == [("1.2a", True), ("1.2b", False)]
