"""Rendering of JSON-wrapped traces into a readable text the line ranges point into.

Each message becomes one block: a header line ``### <agent>`` (plus `` (<role>)`` when the
role adds something), then the message text; blocks are separated by one blank line, which
belongs to no step. A step's content is its whole block, header included, exactly as in the
rendered text, like every other format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from traces.parsers.base import ParsedStep, normalise_newlines


@dataclass(slots=True)
class Message:
    agent: str
    kind: str
    content: str
    role: str = ""
    details: dict = field(default_factory=dict)  # ParsedStep.details
    recipient: str = ""  # ParsedStep.recipient


_PART_NAMES = {
    "image": "image",
    "image_url": "image",
    "input_image": "image",
    "file": "file",
    "input_file": "file",
    "document": "file",
    "audio": "audio",
    "input_audio": "audio",
    "video": "video",
}


def _part_name(item: dict) -> str | None:
    """A non-text content part named in a line ("[image: chart.png]"), or None when not one."""
    kind = str(item.get("type") or "")
    what = _PART_NAMES.get(kind)
    if what is None:
        return None
    ref = ""
    for key in ("filename", "name", "file_name", "url", "image_url", "file_id", "file", "source", "input_audio"):
        value = item.get(key)
        if isinstance(value, dict):
            value = value.get("url") or value.get("filename") or value.get("file_id") or value.get("media_type")
        if isinstance(value, str) and value:
            ref = value if not value.startswith("data:") else value.split(";", 1)[0] + ";…"
            break
    return f"[{what}: {ref}]" if ref else f"[{what}]"


def text_of(value: object) -> str:
    """Message content as text: strings as is, lists of lines joined, content parts flattened:
    text parts (``{"type": "text", "text": ...}``) give their text, images, files and audio are
    named in a line (``[image: chart.png]``), never dropped; anything else is shown as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict) and (named := _part_name(item)) is not None:
                parts.append(named)
            else:
                parts.append(text_of(item))
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def render(messages: list[Message], *, first_line: int = 1) -> tuple[str, list[ParsedStep]]:
    blocks: list[str] = []
    steps: list[ParsedStep] = []
    line = first_line
    for i, msg in enumerate(messages):
        label = msg.agent or msg.role
        if msg.role and msg.role != msg.agent:
            label = f"{label} ({msg.role})"
        body = normalise_newlines(msg.content).rstrip()
        # a message that names no one gets no header: never an invented "unknown" speaker
        block = (f"### {label}\n{body}" if body else f"### {label}") if label else body
        end = line + block.count("\n")
        steps.append(ParsedStep(i, msg.agent, msg.kind, block, line, end, msg.details, recipient=msg.recipient))
        blocks.append(block)
        line = end + 2
    return "\n\n".join(blocks), steps
