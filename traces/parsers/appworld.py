"""AppWorld text traces: bare header lines (indented inside an app agent's message loop).

Inside ``Entering <app> Agent message loop`` the first ``Message to <app> Agent`` is the
Supervisor's request; later ones are API results fed back to the app agent (tool output).
``Response from ... Agent`` blocks are code the agent runs (tool calls). The closing
``Evaluation`` JSON gives the outcome.
"""

from __future__ import annotations

import json
import re

from traces.parsers.base import ParsedTrace, segment

HEADER = re.compile(
    r"^ *(?:Response from (?P<resp>.+?) Agent|Code Execution Output|Entering (?P<enter>.+?) Agent message loop"
    r"|Message to (?P<to>.+?) Agent|Reply from (?P<reply>.+?) Agent to .+|Exiting .+? Agent message loop"
    r"|Response from .+? API|Evaluation|\*{10,} Task .*)\s*$",
    re.M,
)
_BANNER = re.compile(r"^\*{10,} Task [\d/]+ \(([^)]*)\)", re.M)
_EVAL = re.compile(r"^Evaluation\s*$", re.M)
# whom a step addresses, from its header line
_TO = re.compile(r"^ *(?:Message to (?P<to>.+?) Agent|Reply from .+? Agent to (?P<back>.+?)(?: Agent)?)\s*$")


class _Classifier:
    def __init__(self) -> None:
        self.loop_opened = False

    def __call__(self, m: re.Match[str]) -> tuple[str, str]:
        line = m.group(0).strip()
        if resp := m.group("resp"):
            return ("Supervisor" if resp == "Supervisor" else f"{resp} Agent"), "tool_call"
        if m.group("enter"):
            self.loop_opened = True
            return "", "system"
        if to := m.group("to"):
            if to != "Supervisor" and self.loop_opened:
                self.loop_opened = False
                return "Supervisor", "message"
            return "", "tool_output"
        if reply := m.group("reply"):
            return f"{reply} Agent", "message"
        if line.startswith("*"):
            return "User", "message"
        if line in ("Code Execution Output",) or line.startswith("Response from"):
            return "", "tool_output"
        return "", "system"  # Exiting ... loop, Evaluation


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (re.compile(r"^\*{10,} Task \d+/\d+ \(|^Response from Supervisor Agent\s*$", re.M),)


def parse_appworld(text: str) -> ParsedTrace:
    steps = segment(text, HEADER, _Classifier())
    for st in steps:  # the Supervisor's request names the app agent; a reply names whom it answers
        if st.kind == "message" and (m := _TO.match(st.content.split("\n", 1)[0])):
            st.recipient = (
                f"{m['to']} Agent" if m["to"] else m["back"] if m["back"] == "Supervisor" else f"{m['back']} Agent"
            )
    trace = ParsedTrace(format="appworld", raw_text=text, steps=steps, mas_name="AppWorld")
    if m := _BANNER.search(text, 0, 65536):
        trace.external_id = m.group(1)
        if steps and steps[0].agent == "User":
            trace.task = steps[0].content.split("\n", 1)[1].strip() if "\n" in steps[0].content else ""
    evals = list(_EVAL.finditer(text, max(0, len(text) - 200_000)))
    if evals:
        try:
            result = json.loads(text[evals[-1].end() :])
        except ValueError:
            result = None
        if isinstance(result, dict) and isinstance(result.get("success"), bool):
            trace.outcome = "success" if result["success"] else "failure"
            trace.metadata["evaluation"] = {
                k: result[k] for k in ("difficulty", "num_tests", "passes", "failures") if k in result
            }
    return trace
