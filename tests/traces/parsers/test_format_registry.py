"""Adding a text format is one module and one registration: detection and parsing pick it up."""

import re

import pytest

from traces.parsers import FORMATS, detect_format, parse_trace, registry
from traces.parsers.base import ParsedTrace, segment


@pytest.fixture
def with_toy_format(monkeypatch):
    monkeypatch.setattr(registry, "_FORMATS", dict(registry._FORMATS))
    header = re.compile(r"^<<(\w+)>> ", re.M)

    def parse_toy(text: str) -> ParsedTrace:
        steps = segment(text, header, lambda m: (m.group(1), "message"))
        return ParsedTrace(format="toy", raw_text=text, steps=steps, mas_name="ToyMAS")

    registry.format_register(registry.TraceFormat("toy", parse=parse_toy, markers=(re.compile(r"^<<\w+>> ", re.M),)))


def test_a_registered_text_format_is_detected_and_parsed(with_toy_format):
    text = "<<planner>> plan the work\n<<coder>> wrote it\n<<planner>> done\n"
    assert detect_format(text) == "toy"
    trace = parse_trace(text)
    assert trace.format == "toy" and [s.agent for s in trace.steps] == ["planner", "coder", "planner"]
    assert parse_trace(text, format="toy").format == "toy"


def test_the_builtin_formats_are_registered_in_their_order():
    assert FORMATS[:3] == ("chatdev", "metagpt_json", "metagpt_log")
    json_formats = {f.name for f in registry.formats() if f.kind == "json"}
    assert {"metagpt_json", "ag2", "messages_json", "whowhen"} <= json_formats
    sniffed = [f.name for f in registry.formats() if f.sniff is not None]
    # the framework formats (imp-formats branch); span formats register beside them
    assert {"claude", "autogen", "smolagents", "docent", "adamast", "langchain"} <= set(sniffed)
    assert all(registry.json_format(name) is not None for name in sniffed)


def test_a_text_format_needs_a_parse_function():
    with pytest.raises(ValueError, match="needs a parse function"):
        registry.format_register(registry.TraceFormat("broken"))
