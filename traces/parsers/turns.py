"""Role-labelled turns in plain text: one step per turn.

Two shapes, both written by tools that flatten a chat into text:

* ``user: ...`` / ``assistant: ...`` / ``tool: ...`` at the start of a line (the ``raw_trajectory``
  strings of AdaMAST records, many exported transcripts);
* ``[USER]`` / ``[ASSISTANT:planner]`` / ``[ASSISTANT TOOL CALL] search({...})`` header lines
  (AdaMAST's own rendering of a message list, ``adamast/core/trace_formats.py``).

A text is read as turns only when it starts with such a label and has at least two of them;
anything else stays plain text. The text is kept exactly as given (steps are line ranges).
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedStep, segment

ROLES = "user|assistant|system|tool|function|developer|human|ai|observation|ipython"
HEADER = re.compile(
    r"^(?:\[(?P<role>[A-Za-z][\w-]*)(?::(?P<name>[^\]\n]+))?(?P<call> TOOL CALL)?\]"
    rf"|(?P<plain>{ROLES})\s*:)",
    re.MULTILINE | re.IGNORECASE,
)
_KNOWN = frozenset(ROLES.split("|"))


def _who(m: re.Match[str]) -> tuple[str, str] | None:
    role = (m.group("role") or m.group("plain") or "").lower()
    if m.group("role") and role not in _KNOWN:
        return None  # "[INFO]" and the like: not a turn
    name = (m.group("name") or "").strip()
    if m.group("call"):
        return name or role, "tool_call"
    if role in ("tool", "function", "observation", "ipython"):
        return name or role, "tool_output"
    if role in ("system", "developer"):
        return name or role, "system"
    return name or role, "message"


def split_turns(text: str) -> list[ParsedStep] | None:
    """One step per role-labelled turn, or None when ``text`` is not a sequence of turns."""
    first = HEADER.match(text.lstrip())
    if first is None or _who(first) is None:
        return None
    steps = segment(text, HEADER, _who, preamble=None, merge_kinds=frozenset())
    return steps if len(steps) >= 2 else None
