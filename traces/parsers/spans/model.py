"""The one shape every span format is read into before it becomes steps (see ``tree.py``).

Each format module (OTLP, OpenInference/Phoenix, TRAIL, Langfuse, LangSmith, OpenAI Agents SDK)
turns its records into :class:`Span` s: what the span is (``kind``), who runs it, the messages
an LLM call got and gave, a tool's call and result, model, tokens and timing. Pure Python.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

# What a span is, as far as steps are concerned.
AGENT, LLM, TOOL, CHAIN, HANDOFF, GUARDRAIL, EVENT = "agent", "llm", "tool", "chain", "handoff", "guardrail", "event"


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: str = ""
    id: str = ""


@dataclass(slots=True)
class Msg:
    role: str
    content: str
    name: str = ""  # the speaker's own name, when the message carries one
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""  # a tool result: the call it answers


@dataclass(slots=True)
class Span:
    id: str
    trace: str
    parent: str = ""
    name: str = ""
    kind: str = CHAIN
    order: int = 0  # position in the file: ties in start time keep the file's order
    record: int | None = None  # 0-based record of the file the span came from (for messages)
    start: float | None = None  # seconds since the epoch
    end: float | None = None
    agent: str = ""  # for an AGENT span: the agent invoked; otherwise an agent the span names
    model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    inputs: list[Msg] = field(default_factory=list)
    outputs: list[Msg] = field(default_factory=list)
    input_text: str = ""
    output_text: str = ""
    tool_name: str = ""
    tool_args: str = ""
    tool_call_id: str = ""
    target: str = ""  # HANDOFF: the agent handed to
    error: str = ""
    info: dict = field(default_factory=dict)  # trace-level facts: service, framework, benchmark, task

    def size(self) -> int:
        """About how many characters of content the span holds (for the reader's memory budget)."""
        n = len(self.input_text) + len(self.output_text) + len(self.tool_args)
        for m in self.inputs:
            n += len(m.content)
        for m in self.outputs:
            n += len(m.content)
        return n + 200


def as_text(value: object) -> str:
    """A value as readable text: strings as they are, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):  # e.g. integers beyond 64 bits
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def as_int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value == value and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def flatten(attrs: object, prefix: str = "", out: dict | None = None) -> dict:
    """Nested attribute dicts (Phoenix, TRAIL, Langfuse metadata) as the flat dotted keys of the specs:
    ``{"llm": {"input_messages": [{"message": {"role": "user"}}]}}`` -> ``llm.input_messages.0.message.role``."""
    out = {} if out is None else out
    items = attrs.items() if isinstance(attrs, dict) else enumerate(attrs) if isinstance(attrs, list) else ()
    for key, value in items:
        if isinstance(value, dict | list) and value:
            flatten(value, f"{prefix}{key}.", out)
        else:
            out[f"{prefix}{key}"] = value
    return out


def indexed(attrs: dict, prefix: str) -> dict[int, dict[str, object]]:
    """``prefix.N.rest`` keys grouped by N: {N: {rest: value}} (e.g. ``llm.input_messages.``)."""
    groups: dict[int, dict[str, object]] = {}
    plen = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        num, _, rest = key[plen:].partition(".")
        if num.isdigit():
            groups.setdefault(int(num), {})[rest] = value
    return dict(sorted(groups.items()))


def decode_json(value: object) -> object:
    """Attributes often hold JSON as a string (gen_ai.input.messages, input.value): decode it when it is."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            try:
                return json.loads(value, parse_constant=lambda _c: None)  # NaN, which orjson refuses
            except ValueError:
                return value
    return value


_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$")


def epoch(value: object) -> float | None:
    """A timestamp as seconds since the epoch: ISO 8601 strings, Unix nanoseconds (OTLP), seconds or ms."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        v = float(value)
    elif isinstance(value, str) and value.strip().isdigit():
        v = float(value.strip())
    elif isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            return None
        return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    else:
        return None
    if v > 1e17:  # nanoseconds
        return v / 1e9
    if v > 1e14:  # microseconds
        return v / 1e6
    if v > 1e11:  # milliseconds
        return v / 1e3
    return v


def seconds(value: object) -> float | None:
    """A duration: ISO 8601 (``PT1.5S``), or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        m = _ISO_DURATION.match(value.strip())
        if m and any(m.groups()):
            d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
            return d * 86400 + h * 3600 + mi * 60 + s
        try:
            return float(value)
        except ValueError:
            return None
    return None


def iso(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")
