"""OpenManus loguru logs (``main.py`` single agent or ``run_flow`` planning flow).

Within each ``Executing step k/N`` the agent's think phase is a message step (token usage
and ``✨ Manus's thoughts``), ``🛠️ Manus selected n tools`` starts a tool-call step (tool
arguments, activation), ``🎯 Tool '<name>' completed`` starts a tool-output step. Planning
flow lines (plan creation, ``Marked step k as completed``) and the final ``run_flow``
summary are system steps. Step counters restart in planning flows, so they are not keys.
Captures cut off mid-run simply end with the last step seen.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, segment

HEADER = re.compile(
    r"^(?:Enter your prompt: )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \| [A-Z]+ *\| (\S+?):\w+:\d+ - (.*)$", re.M
)
_EXEC = re.compile(r"Executing step (\d+)/(\d+)")
_SELECTED = re.compile(r"\S+ (\S+) selected \d+ tools")
_COMPLETED = re.compile(r"\S+ Tool '([^']*)' completed")


def _classify(m: re.Match[str]) -> tuple[str, str] | None:
    source, msg = m.group(1), m.group(2)
    if _EXEC.match(msg):
        return "Manus", "message"
    if sel := _SELECTED.match(msg):
        return sel.group(1), "tool_call"
    if _COMPLETED.match(msg):
        return "", "tool_output"
    if source.startswith("app.flow") and not msg.startswith("Creating initial plan"):
        return "", "system"
    if source == "__main__":
        return "", "system"
    return None  # token usage, tool activation, warnings: part of the current step


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (re.compile(r"\| app\.agent\.\w+:\w+:\d+ - |Manus's thoughts:", re.M),)


def parse_openmanus(text: str) -> ParsedTrace:
    steps = segment(text, HEADER, _classify, merge_kinds=frozenset({"log", "system"}))
    for st in steps:
        at = st.content.find("'s thoughts:") if st.kind == "message" else -1
        if at > 0:  # "✨ Manus's thoughts:": the thinking agent's name precedes it
            st.agent = st.content[st.content.rfind(" ", 0, at) + 1 : at] or st.agent
    trace = ParsedTrace(format="openmanus", raw_text=text, steps=steps, mas_name="OpenManus")
    execs = _EXEC.findall(text)
    trace.metadata["executing_steps"] = len(execs)
    if execs:
        last = execs[-1]
        trace.metadata["last_step"] = f"{last[0]}/{last[1]}"
    trace.metadata["completed"] = bool(re.search(r"Request processed in|Plan completed", text[-65536:]))
    return trace
