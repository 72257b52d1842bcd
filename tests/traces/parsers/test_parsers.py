"""traces.parsers: hand-written fixtures (exact), real MAST samples (oracles), bad input.

Pure tests: no database, no Django. Real samples live in the `shared` directory beside the
repository root (CI clones the repo beside it); those tests skip when it is missing.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from traces.parsers import (
    FORMATS,
    STEP_KINDS,
    ParsedTrace,
    ParseError,
    detect_format,
    is_mast_data,
    iter_mast_records,
    parse_mast_record,
    parse_trace,
)

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "traces"
MAST = Path(__file__).resolve().parents[4] / "shared" / "mast"
needs_shared = pytest.mark.skipif(not MAST.is_dir(), reason=f"real MAST samples not found at {MAST}")


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def parse_fixture(name: str) -> ParsedTrace:
    return parse_trace(fixture_text(name), filename=name)


def shape(trace: ParsedTrace) -> list[tuple[str, str, int, int]]:
    return [(s.agent, s.kind, s.line_start, s.line_end) for s in trace.steps]


def assert_invariants(trace: ParsedTrace) -> None:
    """Ordered, non-overlapping steps inside the text; content is exactly its lines."""
    lines = trace.raw_text.split("\n")
    assert trace.steps, "non-empty text must give at least one step"
    assert trace.format in FORMATS
    previous_end = 0
    for i, step in enumerate(trace.steps):
        assert step.index == i
        assert step.kind in STEP_KINDS
        assert previous_end < step.line_start <= step.line_end <= len(lines), (i, step.line_start, step.line_end)
        assert step.content == "\n".join(lines[step.line_start - 1 : step.line_end])
        previous_end = step.line_end
    assert "\x00" not in trace.raw_text


# --- hand-written fixtures: exact steps --------------------------------------------------


def test_chatdev_steps_agents_kinds_and_line_ranges() -> None:
    trace = parse_fixture("chatdev_tiny.log")
    assert trace.format == "chatdev" and trace.mas_name == "ChatDev"
    assert shape(trace) == [
        ("", "system", 1, 7),  # **[Preprocessing]**
        ("", "system", 10, 12),  # System: **[chatting]**
        ("Chief Technology Officer", "message", 15, 17),
        ("", "log", 20, 23),  # HTTP Request + OpenAI_Usage_Info merged
        ("Programmer", "message", 26, 31),  # the wrong formula
        ("Code Reviewer", "message", 34, 36),
        ("", "tool_output", 39, 41),  # **[Test Reports]**
    ]
    assert "- 32  # wrong sign" in trace.steps[4].content
    assert trace.task == "Build a CLI that converts Celsius to Fahrenheit."


def test_chatdev_flask_noise_lines_belong_to_no_step() -> None:
    trace = parse_fixture("chatdev_tiny.log")
    covered = {n for s in trace.steps for n in range(s.line_start, s.line_end + 1)}
    flask = {n for n, line in enumerate(trace.raw_text.split("\n"), 1) if "flask app.py did not start" in line}
    assert flask == {9, 14, 19, 25, 33, 38, 43}
    assert not covered & flask


def test_chatdev_http_and_preprocessing_lines_are_not_agents() -> None:
    trace = parse_fixture("chatdev_tiny.log")
    agents = {s.agent for s in trace.steps}
    assert agents == {"", "Chief Technology Officer", "Programmer", "Code Reviewer"}


def test_appworld_steps_and_failed_evaluation() -> None:
    trace = parse_fixture("appworld_tiny.txt")
    assert trace.format == "appworld"
    assert shape(trace) == [
        ("User", "message", 3, 4),
        ("Supervisor", "tool_call", 5, 6),
        ("", "tool_output", 8, 10),  # Code Execution Output
        ("", "system", 12, 12),  # Entering spotify Agent message loop
        ("Supervisor", "message", 13, 14),  # first Message to spotify Agent: the request
        ("spotify Agent", "tool_call", 15, 16),
        ("", "tool_output", 17, 18),  # later Message to spotify Agent: API result
        ("spotify Agent", "message", 19, 20),  # the wrong count
        ("", "system", 21, 21),
        ("", "tool_output", 22, 23),
        ("", "tool_output", 24, 25),
        ("Supervisor", "tool_call", 26, 27),
        ("", "tool_output", 29, 31),
        ("", "system", 34, 42),  # Evaluation
    ]
    assert trace.outcome == "failure"
    assert trace.external_id == "fx001_1"
    assert trace.task == "How many songs are in my Workout playlist?"
    assert trace.metadata["evaluation"]["failures"][0]["trace"] == "4 != 3"


def test_openmanus_cut_off_mid_run_keeps_the_partial_last_step() -> None:
    trace = parse_fixture("openmanus_cutoff.log")
    assert trace.format == "openmanus" and trace.mas_name == "OpenManus"
    assert shape(trace) == [
        ("", "log", 1, 1),
        ("", "system", 2, 2),  # "Enter your prompt: ... Processing your request"
        ("Manus", "message", 3, 6),  # Executing step 1/20 + token usage + thoughts (2 lines)
        ("Manus", "tool_call", 7, 10),
        ("", "tool_output", 11, 12),  # Tool 'python_execute' completed: 41
        ("Manus", "message", 13, 14),
    ]
    assert trace.steps[-1].content.endswith("so the ans")
    assert trace.metadata["completed"] is False
    assert trace.metadata["last_step"] == "2/20"


def test_hyperagent_json_steps_map_to_trajectory_lines() -> None:
    trace = parse_fixture("hyperagent_tiny_human.json")
    assert trace.format == "hyperagent" and trace.metadata["source_format"] == "json"
    assert shape(trace) == [
        ("", "system", 1, 2),  # the two Initialized lines
        ("Planner", "message", 3, 6),
        ("Navigator", "tool_call", 7, 12),  # has an Action: block
        ("Navigator", "message", 13, 13),
        ("Navigator", "message", 14, 14),  # Navigator->Planner
        ("Planner", "message", 15, 17),
        ("Editor", "message", 18, 18),
        ("Editor", "message", 19, 19),
    ]
    trajectory = json.loads(fixture_text("hyperagent_tiny_human.json"))["trajectory"]
    assert trace.raw_text.split("\n") == trajectory
    assert trace.external_id == "demo__demo-1"
    assert trace.task.startswith("`parse_flag` ignores lower-case flags")


def test_ag2_human_json_content_lists_and_code_execution() -> None:
    trace = parse_fixture("ag2_mathchat_human.json")
    assert trace.format == "ag2" and trace.mas_name == "AG2"
    assert shape(trace) == [
        ("mathproxyagent", "message", 1, 5),
        ("assistant", "tool_call", 7, 11),
        ("mathproxyagent", "tool_output", 13, 15),
        ("assistant", "message", 17, 18),
    ]
    assert trace.steps[0].content.split("\n")[0] == "### mathproxyagent (assistant)"
    assert "print(3 * 4)" in trace.steps[1].content
    assert trace.outcome == "failure"
    assert trace.external_id == "fixture-ag2-1"


def test_whowhen_run_where_every_step_is_one_agent() -> None:
    trace = parse_fixture("whowhen_one_agent.json")
    assert trace.format == "whowhen" and trace.mas_name == "AG2"
    assert [s.agent for s in trace.steps] == ["Math_Expert"] * 5
    assert [(s.line_start, s.line_end) for s in trace.steps] == [(1, 2), (4, 5), (7, 8), (10, 11), (13, 14)]
    mistake = trace.steps[int(trace.metadata["mistake_step"])]
    assert "1, 2 and 3" in mistake.content
    assert trace.outcome == "failure"
    assert trace.task == "What is the sum of the first three primes?"


def test_magentic_one_console_log_turns() -> None:
    trace = parse_fixture("magentic_console_log.txt")
    assert trace.format == "magentic_one" and trace.mas_name == "Magentic-One"
    assert shape(trace) == [
        ("", "log", 1, 5),
        ("user", "message", 6, 7),
        ("MagenticOneOrchestrator", "message", 8, 9),
        ("WebSurfer", "message", 10, 13),
        ("MagenticOneOrchestrator", "message", 14, 15),
        ("", "log", 16, 18),
    ]
    assert trace.metadata["final_answer"] == "1887"
    assert trace.task == "What year was the Eiffel Tower completed?"


def test_metagpt_run_json_prompt_becomes_human_step() -> None:
    trace = parse_fixture("metagpt_run.json")
    assert trace.format == "metagpt_json" and trace.mas_name == "MetaGPT"
    assert shape(trace) == [
        ("Human", "message", 1, 2),
        ("SimpleCoder", "message", 4, 8),
        ("SimpleTester", "message", 9, 13),
        ("SimpleReviewer", "message", 14, 14),
    ]
    assert trace.external_id == "99"
    assert "return s\n" in trace.steps[1].content


def test_metagpt_mmlu_log_speakers_under_new_messages() -> None:
    trace = parse_fixture("metagpt_mmlu.txt")
    assert trace.format == "metagpt_log"
    assert shape(trace) == [
        ("", "log", 1, 1),
        ("Human", "message", 3, 9),
        ("SimpleCoder", "message", 12, 16),
        ("SimpleReviewer", "message", 20, 22),
        ("", "log", 26, 26),
    ]


def test_generic_messages_jsonl_roles_and_tools() -> None:
    trace = parse_fixture("messages.jsonl")
    assert trace.format == "messages_json"
    assert [(s.agent, s.kind) for s in trace.steps] == [
        ("system", "system"),
        ("alice", "message"),
        ("planner", "tool_call"),
        ("book", "tool_output"),
        ("planner", "message"),
    ]
    assert '"people": 3' in trace.steps[2].content


def test_plaintext_merges_tiny_blocks() -> None:
    trace = parse_fixture("plain_notes.txt")
    assert trace.format == "plaintext"
    assert shape(trace) == [("", "log", 1, 11), ("", "log", 13, 13)]


def test_plaintext_caps_steps_at_200_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 451))
    trace = parse_trace(text)
    assert [(s.line_start, s.line_end) for s in trace.steps] == [(1, 200), (201, 400), (401, 450)]
    assert_invariants(trace)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if not p.name.startswith("mast_")))
def test_fixture_invariants(name: str) -> None:
    assert_invariants(parse_fixture(name))


# --- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("chatdev_tiny.log", "chatdev"),
        ("appworld_tiny.txt", "appworld"),
        ("openmanus_cutoff.log", "openmanus"),
        ("hyperagent_tiny_human.json", "hyperagent"),
        ("ag2_mathchat_human.json", "ag2"),
        ("whowhen_one_agent.json", "whowhen"),
        ("magentic_console_log.txt", "magentic_one"),
        ("metagpt_run.json", "metagpt_json"),
        ("metagpt_mmlu.txt", "metagpt_log"),
        ("messages.jsonl", "messages_json"),
        ("plain_notes.txt", "plaintext"),
    ],
)
def test_detect_format_by_content(name: str, expected: str) -> None:
    # no filename given: content alone decides
    assert detect_format(fixture_text(name)) == expected


def test_detection_only_reads_the_first_64kb() -> None:
    late_marker = "filler line\n" * 6000 + "[2026-30-11 09:00:00 INFO] Programmer: hello\n"
    assert len(late_marker) > 65536
    assert detect_format(late_marker) == "plaintext"
    assert detect_format(late_marker[-50_000:]) == "chatdev"


def test_earliest_marker_wins_over_a_quoted_one() -> None:
    text = fixture_text("chatdev_tiny.log") + "\nHyperAgent_x - INFO - Planner's Response: quoted\n"
    assert detect_format(text) == "chatdev"


def test_mas_name_hint_decides_between_json_message_shapes() -> None:
    bare = json.dumps([{"content": "hi", "role": "user", "name": "alice"}, {"content": "ok", "role": "assistant"}])
    assert detect_format(bare) == "messages_json"
    assert detect_format(bare, mas_name="AG2") == "ag2"
    assert parse_trace(bare, mas_name="AG2").mas_name == "AG2"


def test_filename_is_a_fallback_for_markerless_text() -> None:
    assert detect_format("nothing recognisable\n", filename="run/console_log.txt") == "magentic_one"
    assert detect_format("nothing recognisable\n", filename="notes.txt") == "plaintext"


def test_chatdev_log_line_is_not_taken_for_a_json_array() -> None:
    assert detect_format("[2026-30-11 09:00:00 INFO] **[Preprocessing]**\n") == "chatdev"


def test_explicit_format_overrides_detection() -> None:
    trace = parse_trace(fixture_text("chatdev_tiny.log"), format="plaintext")
    assert trace.format == "plaintext"


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty_trace_is_an_error(text: str) -> None:
    with pytest.raises(ParseError, match="empty trace"):
        parse_trace(text, filename="empty.log")


def test_invalid_json_names_file_and_line() -> None:
    text = '{\n  "history": [\n    {"content": "a", "role": "user",,}\n  ]\n}\n'
    with pytest.raises(ParseError) as err:
        parse_trace(text, filename="broken.json")
    assert err.value.line == 3
    assert str(err.value).startswith("broken.json, line 3: invalid JSON")


def test_jsonl_bad_line_names_its_line_number() -> None:
    text = '{"role": "user", "content": "a"}\n{"role": "assistant", "content": "b"}\n{"role": oops}\n'
    with pytest.raises(ParseError) as err:
        parse_trace(text, filename="chat.jsonl")
    assert err.value.line == 3
    assert "chat.jsonl, line 3" in str(err.value)


def test_unknown_format_name_is_rejected() -> None:
    with pytest.raises(ParseError, match="unknown format 'crewai'"):
        parse_trace("hello", format="crewai")


def test_nul_characters_are_replaced_and_counted() -> None:
    text = fixture_text("chatdev_tiny.log").replace("Write the converter", "Write\x00the\x00converter")
    trace = parse_trace(text)
    assert trace.metadata["nul_replaced"] == 2
    assert "Write\ufffdthe\ufffdconverter" in trace.steps[2].content
    assert_invariants(trace)


def test_nul_escaped_inside_json_is_replaced_too() -> None:
    text = json.dumps([{"role": "user", "content": "a\u0000b"}])
    trace = parse_trace(text)
    assert "a\ufffdb" in trace.steps[0].content and trace.metadata["nul_replaced"] == 1


def test_crlf_line_endings_count_as_one_line_break() -> None:
    trace = parse_trace(fixture_text("chatdev_tiny.log").replace("\n", "\r\n"))
    assert shape(trace) == shape(parse_fixture("chatdev_tiny.log"))


def test_format_parser_without_headers_falls_back_to_blocks() -> None:
    trace = parse_trace("just text\n\nmore text\n", format="chatdev")
    assert trace.metadata["fallback"] == "plaintext" and len(trace.steps) == 1


# --- MAST-Data files -----------------------------------------------------------------------


def test_is_mast_data_sniffs_records_not_other_json() -> None:
    assert is_mast_data((FIXTURES / "mast_full.jsonl").read_bytes()[:4096])
    assert is_mast_data((FIXTURES / "mast_human.json").read_bytes()[:4096])
    assert not is_mast_data((FIXTURES / "whowhen_one_agent.json").read_bytes()[:4096])
    assert not is_mast_data((FIXTURES / "chatdev_tiny.log").read_bytes()[:4096])


def test_full_dataset_jsonl_records() -> None:
    with (FIXTURES / "mast_full.jsonl").open("rb") as f:
        records = list(iter_mast_records(f, filename="mast_full.jsonl"))
    assert [(r.number, r.mas_name, r.trace_id, r.key, r.index) for r in records] == [
        (0, "ChatDev", "101", "ChatDev_ProgramDev_GPT4o", 3),
        (1, "MetaGPT", "102", "MetaGPT_MMLU_Claude", "7"),
    ]
    assert records[0].mast_annotation == {"1.1": 0, "1.2": 1, "2.6": None, "3.3": 1}
    assert records[0].annotations is None and records[0].round is None

    chatdev = parse_mast_record(records[0])
    assert (chatdev.format, chatdev.mas_name, chatdev.llm_name, chatdev.benchmark, chatdev.external_id) == (
        "chatdev",
        "ChatDev",
        "GPT-4o",
        "ProgramDev",
        "101",
    )
    assert chatdev.metadata["mad_key"] == "ChatDev_ProgramDev_GPT4o" and chatdev.metadata["mad_index"] == 3
    assert shape(chatdev) == shape(parse_fixture("chatdev_tiny.log"))

    metagpt = parse_mast_record(records[1])
    assert metagpt.format == "metagpt_log" and metagpt.metadata["nul_replaced"] == 1
    assert_invariants(metagpt)


def test_human_labelled_array_with_nan_labels_and_swapped_names() -> None:
    with (FIXTURES / "mast_human.json").open("rb") as f:
        records = list(iter_mast_records(f, filename="mast_human.json"))
    assert [r.round for r in records] == ["Round 1", "Generlazability"]
    assert records[0].annotations[0]["annotator_1"] is True
    assert records[1].annotations[0]["annotator_3"] is None  # bare NaN in the file
    assert records[0].mast_annotation is None
    openmanus = parse_mast_record(records[1])
    # the human file says mas_name "GAIA", benchmark_name "OpenManus"
    assert (openmanus.mas_name, openmanus.benchmark, openmanus.format) == ("OpenManus", "GAIA", "openmanus")
    assert openmanus.metadata["mad_names_swapped"] == {"mas_name": "GAIA", "benchmark_name": "OpenManus"}


def test_truncated_json_array_names_the_record() -> None:
    data = (FIXTURES / "mast_human.json").read_bytes()
    cut = data[: data.index(b"Generlazability") + 200]
    with pytest.raises(ParseError) as err:
        list(iter_mast_records(io.BytesIO(cut), filename="cut.json"))
    assert err.value.record == 1
    assert "cut.json, record 2" in str(err.value)


def test_mast_jsonl_bad_line_names_record_and_line() -> None:
    good = (FIXTURES / "mast_full.jsonl").read_bytes().split(b"\n")[0]
    data = good + b"\n\n" + b'{"mas_name": "AG2", "trace": \n'
    with pytest.raises(ParseError) as err:
        list(iter_mast_records(io.BytesIO(data), filename="bad.jsonl"))
    assert (err.value.record, err.value.line) == (1, 3)


def test_record_without_trace_text_is_rejected() -> None:
    data = json.dumps([{"mas_name": "AG2", "trace_id": 1, "trace": {"key": "k", "index": 0}}]).encode()
    with pytest.raises(ParseError, match=r"x.json, record 1, line 1: record has no trace text"):
        list(iter_mast_records(io.BytesIO(data), filename="x.json"))


def test_invalid_mast_annotation_value_is_rejected() -> None:
    rec = {"mas_name": "AG2", "trace": "a", "mast_annotation": {"1.1": 2}}
    with pytest.raises(ParseError, match=r"mast_annotation\['1.1'\] = 2"):
        list(iter_mast_records(io.BytesIO(json.dumps([rec]).encode()), filename="x.json"))


def test_empty_mast_file_is_an_error() -> None:
    with pytest.raises(ParseError, match="empty file"):
        list(iter_mast_records(io.BytesIO(b"  \n"), filename="none.json"))


class CountingReader(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.bytes_read += len(out)
        return out


def big_array(records: int, size: int) -> bytes:
    # brackets, braces and escaped quotes inside the strings must not confuse the splitter
    body = ('x [ { "} ] \\ ' * (size // 13))[:size]
    items = [
        {"mas_name": "AG2", "trace_id": i, "trace": {"key": "k", "index": i, "trajectory": f"{i}\n{body}"}}
        for i in range(records)
    ]
    return json.dumps(items, indent=1).encode()


def test_array_is_streamed_not_loaded_whole() -> None:
    data = big_array(12, 700_000)
    reader = CountingReader(data)
    records = iter_mast_records(reader, filename="big.json")
    first = next(records)
    assert first.trace_id == "0"
    assert reader.bytes_read < len(data) / 2
    rest = list(records)
    assert [r.trace_id for r in rest] == [str(i) for i in range(1, 12)]
    expected = json.loads(data)
    assert all(r.trajectory == expected[r.number]["trace"]["trajectory"] for r in [first, *rest])


# --- real MAST samples ---------------------------------------------------------------------

REAL_TRACE_FILES = (
    sorted(
        p
        for p in (MAST / "traces").rglob("*")
        if p.is_file()
        and p.suffix in (".log", ".txt", ".json", ".md")
        and "early_judge_outputs" not in p.parts
        and not p.name.endswith(("Config.json", "meta.txt"))
    )
    if MAST.is_dir()
    else []
)


@needs_shared
@pytest.mark.parametrize("path", REAL_TRACE_FILES, ids=lambda p: p.name[:60])
def test_real_trace_invariants(path: Path) -> None:
    trace = parse_trace(path.read_text(encoding="utf-8"), filename=path.name)
    assert_invariants(trace)
    assert trace.mas_name


@needs_shared
def test_real_samples_are_detected_as_their_framework() -> None:
    expected = {
        "chatdev": {"chatdev"},
        "metagpt": {"metagpt_json"},
        "metagpt_mmlu": {"metagpt_log"},
        "ag2": {"ag2", "whowhen"},
        "hyperagent": {"hyperagent"},
        "appworld": {"appworld"},
        "magentic_one": {"magentic_one", "whowhen"},
        "openmanus": {"openmanus"},
    }
    for path in REAL_TRACE_FILES:
        group = path.relative_to(MAST / "traces").parts[0]
        assert detect_format(path.read_text(encoding="utf-8"), filename=path.name) in expected[group], path


@needs_shared
def test_real_chatdev_agent_steps_match_speaker_header_lines() -> None:
    speaker = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO\] ([A-Z][\w ]+): ")
    for path in (MAST / "traces" / "chatdev").glob("*/*.log"):
        text = path.read_text(encoding="utf-8")
        names = [m.group(1) for line in text.split("\n") if (m := speaker.match(line))]
        expected = Counter(n for n in names if n not in ("System", "HTTP Request"))
        trace = parse_trace(text)
        assert Counter(s.agent for s in trace.steps if s.agent) == expected, path.name


@needs_shared
def test_real_hyperagent_agent_steps_match_response_lines() -> None:
    for path in (MAST / "traces" / "hyperagent").glob("*_human.json"):
        trajectory = json.loads(path.read_text(encoding="utf-8"))["trajectory"]
        responses = [
            line
            for line in trajectory
            if line.startswith("HyperAgent_") and ("'s Response: " in line or "->Planner: " in line)
        ]
        trace = parse_trace(path.read_text(encoding="utf-8"), filename=path.name)
        agent_steps = [s for s in trace.steps if s.agent]
        assert len(agent_steps) == len(responses), path.name
        assert {s.agent for s in agent_steps} <= {"Planner", "Navigator", "Editor", "Executor"}


def oracle(name: str) -> list[dict]:
    return json.loads((MAST / "mad_thirdparty_derived" / name).read_text(encoding="utf-8"))


@needs_shared
def test_real_appworld_matches_thirdparty_steps() -> None:
    """Exact: same step count and per-agent counts; the oracle's "System" is our "" agent.

    Kinds are not compared: the oracle calls outputs "tool_result" and labels some
    responses "message" from their content, where we classify by header.
    """
    by_id = {r["metadata"]["trace_id"]: r for r in oracle("appworld_output_mad.json")}
    for path in sorted((MAST / "traces" / "appworld").glob("*.txt")):
        trace = parse_trace(path.read_text(encoding="utf-8"))
        theirs = by_id[trace.external_id]
        assert len(trace.steps) == len(theirs["steps"]), path.name
        ours = Counter(s.agent or "System" for s in trace.steps)
        assert ours == Counter(s["agent"] for s in theirs["steps"]), path.name
        assert trace.outcome == ("success" if theirs["metadata"]["success"] in (True, "True") else "failure")


@needs_shared
def test_real_ag2_matches_thirdparty_steps() -> None:
    """Oracle records are matched by task text; several runs (GPT-4o, Claude) share a task,
    so our step count must equal one of them, with the same agents and tool pairing."""
    by_task: dict[str, list[dict]] = {}
    for r in oracle("ag2_output_mad.json"):
        by_task.setdefault(r["metadata"]["task"].strip(), []).append(r)
    matched = 0
    for path in sorted((MAST / "traces" / "ag2").glob("*_human.json")):
        trace = parse_trace(path.read_text(encoding="utf-8"))
        candidates = [
            [(s["agent"], s["kind"].replace("tool_result", "tool_output")) for s in r["steps"]]
            for r in by_task.get(trace.task.strip(), [])
        ]
        if candidates:
            matched += 1
            assert [(s.agent, s.kind) for s in trace.steps] in candidates, path.name
    assert matched == 3


@needs_shared
def test_real_metagpt_matches_thirdparty_steps() -> None:
    """Matched by prompt. Tolerance: ``run_*_new.json`` variants may be other runs of the
    same prompt than the one the oracle parsed, so at least two exact matches are required."""
    by_task: dict[str, list[dict]] = {}
    for r in oracle("metagpt_output_mad.json"):
        by_task.setdefault(r["metadata"]["task"].strip(), []).append(r)
    exact = 0
    for path in sorted((MAST / "traces" / "metagpt" / "runs").glob("*.json")):
        trace = parse_trace(path.read_text(encoding="utf-8"))
        for r in by_task.get(trace.task.strip(), []):
            if [s.agent for s in trace.steps] == [s["agent"] for s in r["steps"]]:
                exact += 1
    assert exact >= 2


@needs_shared
def test_real_whowhen_single_agent_run() -> None:
    path = MAST / "traces" / "ag2" / "WhoWhen_Algorithm-Generated_47.json"
    trace = parse_trace(path.read_text(encoding="utf-8"))
    assert len(trace.steps) == 6
    assert {s.agent for s in trace.steps} == {"Mesopotamian_Number_Systems_Expert"}
    assert trace.steps[int(trace.metadata["mistake_step"])].agent == trace.metadata["mistake_agent"]


@needs_shared
def test_real_magentic_whowhen_takes_agent_from_role() -> None:
    path = MAST / "traces" / "magentic_one" / "WhoWhen_Hand-Crafted_7.json"
    trace = parse_trace(path.read_text(encoding="utf-8"))
    assert trace.mas_name == "Magentic-One" and len(trace.steps) == 25
    assert {s.agent for s in trace.steps} == {"human", "Orchestrator", "WebSurfer"}


@needs_shared
def test_real_openmanus_capture_cut_off_mid_run() -> None:
    trace = parse_trace((MAST / "traces" / "openmanus" / "nonMAST_openmanus_output.md").read_text(encoding="utf-8"))
    assert trace.metadata["completed"] is False and trace.metadata["last_step"] == "8/20"
    assert sum(1 for s in trace.steps if s.kind == "message" and s.agent == "Manus") == 8


@needs_shared
def test_real_openmanus_planning_flow_counter_restarts() -> None:
    text = (MAST / "traces" / "openmanus" / "e1fc63a2-da7a-432f-be78-7c4a95598703.log").read_text(encoding="utf-8")
    trace = parse_trace(text)
    executing = text.count("app.agent.base:run:140 - Executing step ")
    assert executing == 24
    assert sum(1 for s in trace.steps if s.kind == "message" and s.agent == "Manus") == executing
    assert trace.metadata["completed"] is True


@needs_shared
def test_real_human_labelled_file_parses_every_record() -> None:
    path = MAST / "human_annotations" / "mad_human_labelled_19records.json"
    expected_format = {
        "AppWorld": "appworld",
        "HyperAgent": "hyperagent",
        "AG2": "ag2",
        "ChatDev": "chatdev",
        "MetaGPT": {"ProgramDev": "metagpt_json", "MMLU": "metagpt_log"},
    }
    with path.open("rb") as f:
        records = list(iter_mast_records(f, filename=path.name))
    assert len(records) == 19
    for rec in records:
        trace = parse_mast_record(rec)
        assert_invariants(trace)
        want = expected_format.get(rec.mas_name)
        if isinstance(want, dict):
            want = want[rec.benchmark_name]
        if want:
            assert trace.format == want, rec.number
    gaia = [parse_mast_record(r) for r in records if r.mas_name == "GAIA"]
    assert sorted(t.mas_name for t in gaia) == ["Magentic-One", "OpenManus"]
    assert sum(v is None for r in records for a in r.annotations for v in a.values()) == 2  # the two NaN labels


def test_parse_trace_refuses_a_whole_mast_data_file() -> None:
    with pytest.raises(ParseError, match="iter_mast_records"):
        parse_trace(fixture_text("mast_human.json"), filename="mast_human.json")


def test_ag2_jsonl_is_read_line_by_line() -> None:
    text = (
        '{"content": "2 + 2?", "role": "assistant", "name": "mathproxyagent"}\n{"content": "4", "name": "assistant"}\n'
    )
    trace = parse_trace(text, filename="chat.jsonl")
    assert trace.format == "ag2"
    assert [s.agent for s in trace.steps] == ["mathproxyagent", "assistant"]


def test_hyperagent_bare_list_of_log_lines() -> None:
    lines = json.loads(fixture_text("hyperagent_tiny_human.json"))["trajectory"]
    trace = parse_trace(json.dumps(lines))
    assert trace.format == "hyperagent"
    assert shape(trace) == shape(parse_fixture("hyperagent_tiny_human.json"))
