"""MetaGPT: run JSON ``{run_id, prompt, content, ...}`` (content is a loguru log) and the
MMLU-style ``=== MetaGPT Agent Communication Log ===`` text log.

Agents are role names (``SimpleCoder``), not the persona names (``Alice``): the persona
is kept in the step's header line.
"""

from __future__ import annotations

import re

from traces.parsers.base import SKIP, ParsedTrace, ParseError, segment
from traces.parsers.messages import load_json
from traces.parsers.render import Message, render, text_of

LOGURU = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \| [A-Z]+ *\| \S+ - (.*)$", re.M)
_ACT = re.compile(r"\w+\((\w+)\): to do ")
MMLU = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] (?:FROM: (\S+) TO: .*|NEW MESSAGES:)|-{20,}|===.*)\s*$", re.M
)
_SPEAKER = re.compile(r"^(\w+):(?: |$)", re.M)
_NEW = "\0new"


def _classify_loguru(m: re.Match[str]) -> tuple[str, str]:
    act = _ACT.match(m.group(1))
    return (act.group(1), "message") if act else ("", "log")


def _classify_mmlu(m: re.Match[str]) -> tuple[str, str]:
    line = m.group(0)
    if line.startswith("-"):
        return SKIP
    if line.startswith("="):
        return "", "log"
    return (m.group(1), "message") if m.group(1) else (_NEW, "message")


# Lines only this format writes: format detection looks for them (traces.parsers.registry).
MARKERS = (
    re.compile(r"^=== MetaGPT Agent Communication Log|^\[[\d: -]{19}\] (?:NEW MESSAGES:|FROM: )", re.M),
    re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \| [A-Z]+ *\| \S+ - \w+\(\w+\): to do ", re.M),
)


def parse_metagpt_log(text: str, *, preamble: tuple[str, str] = ("", "log")) -> ParsedTrace:
    if MMLU.search(text, 0, 65536) and not LOGURU.search(text, 0, 65536):
        steps = segment(text, MMLU, _classify_mmlu, preamble=preamble)
        for st in steps:
            if st.agent == _NEW:
                # the speaker is the first "<Name>: " line under "NEW MESSAGES:"
                sp = _SPEAKER.search(st.content, st.content.find("\n") + 1)
                st.agent, st.kind = (sp.group(1), "message") if sp else ("", "system")
    else:
        steps = segment(text, LOGURU, _classify_loguru, preamble=preamble)
    return ParsedTrace(format="metagpt_log", raw_text=text, steps=steps, mas_name="MetaGPT")


def parse_metagpt_json(text: str, *, filename: str = "", obj: object = None) -> ParsedTrace:
    obj = load_json(text, filename=filename) if obj is None else obj
    if not isinstance(obj, dict) or not isinstance(obj.get("content"), str):
        raise ParseError("MetaGPT run JSON needs a 'content' string", filename=filename)
    prompt = text_of(obj.get("prompt") or "")
    head, _ = render([Message("Human", "message", prompt, "prompt")]) if prompt else ("", [])
    raw = f"{head}\n\n{obj['content']}" if head else obj["content"]
    trace = parse_metagpt_log(raw, preamble=("Human", "message") if head else ("", "log"))
    trace.format = "metagpt_json"
    trace.task = prompt
    trace.external_id = str(obj.get("run_id", "") or "")
    trace.metadata["source_format"] = "json"
    for key in ("timestamp", "cost", "log_file"):
        if key in obj:
            trace.metadata[key] = obj[key]
    return trace
