"""The "MAST official judge": the prompt and answer parser of the MAST authors' own annotator.

The MAST authors publish their LLM-as-a-judge annotator as ``agentdash`` on PyPI (pinned in
requirements.txt; default model o1-mini, the paper used o1). This provider calls that package's
own code, so the prompt is theirs word for word and no text of it is copied here:

- the prompt: ``agentdash.annotator._create_evaluation_prompt(trace)`` with the definitions and
  examples the package loads itself (``_load_definitions`` / ``_load_examples``), sent as one user
  message as agentdash does. The trace is our rendering of its steps under the run's character
  budget (``prompting.render_trace``, the same text every other judge reads), so the request fits
  the model's context and comparisons between judges are like for like;
- the answer: the ``A. ... B. yes|no C. 1.1 yes ...`` text between ``@@`` marks, parsed by
  ``agentdash.annotator._parse_response`` / ``_extract_summary`` / ``_extract_task_completion``.

One deliberate difference: agentdash files a mode it cannot find in the answer as 0 (absent)
and logs "Could not find mode X in response". Here such a mode is *unknown*: no label is written
for it (the item's parsed answer lists it under ``warnings``), so a truncated or sloppy answer
does not count as the judge saying "absent". We learn which modes it could not find from that
same log record, caught per thread while its parser runs. An answer that states no mode at all
is unusable (the item fails, its raw answer kept); there is no repair request, because the
authors' protocol has none.

Codes are matched to the run's taxonomy version by code (1.1 ... 3.3). agentdash's built-in
names call 3.2 "No or Incorrect Verification" and 3.3 "Weak Verification"; the project's
version keeps its own names, the code decides. Temperature: agentdash sends 1.0, which is this
preset's default; reasoning models get no temperature at all (``openai_chat.request_kwargs``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import agentdash
from agentdash.annotator import annotator as _AgentdashAnnotator

from annotations.judge import prompting
from annotations.judge.providers.openai_chat import OpenAIChat

AGENTDASH_VERSION = agentdash.__version__
MAST_CODES = tuple(agentdash.MAST_TAXONOMY)
_LOGGER = logging.getLogger("agentdash.annotator")

_instance_lock = threading.Lock()
_instance: _AgentdashAnnotator | None = None


def _annotator() -> _AgentdashAnnotator:
    """An agentdash annotator without its OpenAI client (we send the request ourselves)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            inst = _AgentdashAnnotator.__new__(_AgentdashAnnotator)
            inst.model = ""
            inst.definitions = inst._load_definitions()
            inst.examples = inst._load_examples()
            _instance = inst
        return _instance


class _NotFound(logging.Handler):
    """Collects the codes agentdash's parser reports as not found, for the calling thread only."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.thread = threading.get_ident()
        self.codes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        msg = record.getMessage()
        if msg.startswith("Could not find mode ") and msg.endswith(" in response"):
            self.codes.append(msg.removeprefix("Could not find mode ").removesuffix(" in response"))


def mast_prompt(trace_text: str) -> str:
    """agentdash's evaluation prompt for this trace text."""
    return _annotator()._create_evaluation_prompt(trace_text)


def mast_parse(raw: str, *, codes: Sequence[str]) -> prompting.Answer:
    """agentdash's parse of an answer; modes it could not find (or the version lacks) are left out."""
    ann = _annotator()
    handler = _NotFound()
    previous = _LOGGER.level
    _LOGGER.addHandler(handler)
    if _LOGGER.getEffectiveLevel() > logging.WARNING:
        _LOGGER.setLevel(logging.WARNING)  # the handler must see the record; propagation is unchanged
    try:
        found = ann._parse_response(raw or "")
    finally:
        _LOGGER.removeHandler(handler)
        _LOGGER.setLevel(previous)
    summary = ann._extract_summary(raw or "")
    done = ann._extract_task_completion(raw or "")
    unknown = set(handler.codes)
    wanted = set(codes)
    modes = tuple(
        prompting.ModeAnswer(code, bool(value), (), summary[:500] if value else "")
        for code, value in found.items()
        if code in wanted and code not in unknown
    )
    if not modes:
        raise prompting.AnswerError("the answer states none of the failure modes (agentdash's @@ format)")
    warnings = [f"mode {c} not stated in the answer: unknown" for c in codes if c in unknown]
    warnings += [f"mode {c} is not asked by the MAST prompt: unknown" for c in codes if c not in found]
    return prompting.Answer("yes" if done else "no", modes, tuple(warnings))


class MastOfficial(OpenAIChat):
    """agentdash's prompt and parser over any OpenAI-compatible server (a connection or a base URL)."""

    name = "mast"
    rater_kind = "llm"
    uses_project_prompt = False
    prompt_identity = f"agentdash {AGENTDASH_VERSION}"
    json_mode = False  # the authors' protocol answers in text between @@ marks

    def rater_name(self, *, model: str, prompt_number: int | None = None, trained_on: str = "") -> str:
        return f"{model} · MAST official (agentdash {AGENTDASH_VERSION})"

    def build_messages(self, *, template, modes, steps, max_chars, few_shot=()):  # noqa: ANN001 - see base
        trace_text, info = prompting.render_trace(steps, max_chars=max_chars)
        return [{"role": "user", "content": mast_prompt(trace_text)}], info

    def parse_answer(self, raw: str, *, codes: Sequence[str], valid_steps: Sequence[int]) -> prompting.Answer:
        return mast_parse(raw, codes=codes)

    def repair_messages(self, messages, *, raw, error, codes):  # noqa: ANN001 - see base
        return None
