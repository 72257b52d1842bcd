"""Magentic-One agbench ``console_log.txt``.

Setup noise up to ``SCENARIO.PY STARTING !#!#`` is one log step; each turn starts at a
``---------- <agent> ----------`` header; the ``... !#!#`` lines at the end are log lines.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, segment

HEADER = re.compile(r"^---------- (.+?) ----------\s*$|^.*!#!#\s*$", re.M)
_FINAL = re.compile(r"^FINAL ANSWER: ?(.*)$", re.M)
_TERMINALS = frozenset({"ComputerTerminal", "Computer_terminal"})


def _classify(m: re.Match[str]) -> tuple[str, str]:
    agent = m.group(1)
    if agent is None:
        return "", "log"
    return agent, ("tool_output" if agent in _TERMINALS else "message")


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (re.compile(r"^SCENARIO\.PY STARTING !#!#|^---------- (?:user|MagenticOneOrchestrator) -{10}$", re.M),)


def parse_magentic_one(text: str) -> ParsedTrace:
    steps = segment(text, HEADER, _classify)
    trace = ParsedTrace(format="magentic_one", raw_text=text, steps=steps, mas_name="Magentic-One")
    for st in steps:
        if st.agent == "user":
            trace.task = st.content.split("\n", 1)[1].strip() if "\n" in st.content else ""
            break
    finals = _FINAL.findall(text, max(0, len(text) - 65536))
    if finals:
        trace.metadata["final_answer"] = finals[-1].strip()
    return trace
