"""Judge prompts and answers (pure: no Django, no ORM, no network).

- ``render_trace``: the trace as numbered steps under a character budget. Over the budget it keeps
  the start, the end and the steps most likely to matter (errors, failed tests, verification,
  repeated messages, agent switches), marks each gap ``[... 37 steps omitted ...]`` and says
  what it did (``Truncation``).
- ``build_messages``: the chat messages from a template with ``{placeholders}``.
- ``parse_answer``: tolerant JSON parsing (code fences, leading prose, trailing commas,
  "yes"/"no" strings) and validation: every mode of the taxonomy must be answered, or the answer
  is rejected whole with a reason that is sent back to the model once as a repair request.

Budget: ``DEFAULT_MAX_CHARS`` = 120,000 characters, about 30k tokens at ~4 characters per token
(settings.MAST_JUDGE_MAX_CHARS overrides it per site).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_MAX_CHARS = 120_000
PLACEHOLDERS = (
    "{definitions}",
    "{examples}",
    "{few_shot}",
    "{answer_format}",
    "{mode_codes}",
    "{trace}",
    "{attribution_format}",
)

DEFAULT_TEMPLATE = """You are an expert in multi-agent LLM systems. Read the trace of one run of a \
multi-agent system below and decide, for each failure mode of the taxonomy, whether it occurs in \
the trace.

## Failure modes (definitions)
{definitions}

## Examples from the taxonomy
{examples}
{few_shot}
## The trace
Each step is marked [step N] with its agent; cite steps by these numbers.

{trace}

## Your answer
{answer_format}
"""

ANSWER_FORMAT = """Answer with one JSON object and nothing else:
{{"task_success": "yes" | "no" | "unknown",
 "modes": [{{"code": "<mode code>", "present": true | false, "evidence_steps": [<step numbers>],
            "rationale": "<one sentence>"}}, ...]}}
Give exactly one entry for each of these codes: {codes}.
"present" is true only when the trace shows the failure; cite the steps that show it."""

# {attribution_format}: ask for the failure attribution too (Who&When's mistake_agent / mistake_step).
ATTRIBUTION_FORMAT = """In the same JSON object, add the failure attribution:
"attribution": {"agent": "<the agent responsible for the failure>", "step": <step number> | null,
                "reason": "<one sentence>"}
"step" is the decisive step: the earliest step from which the failure could no longer be avoided
(null if the task succeeded or no single step decides it); "agent" is the agent of that step."""

REPAIR_MESSAGE = (
    "Your previous answer could not be used: {error}. Reply again with ONLY the JSON object in the "
    "requested format, one entry for each of these codes: {codes}."
)

# Steps whose text matches these are kept first when a trace must be cut.
SALIENT = re.compile(
    r"error|exception|traceback|fail|failed|failure|assert|verify|verif|test|wrong|incorrect|bug|"
    r"retry|again|repeat|loop|timeout|terminat|stuck|cannot|can't|unable|missing|invalid|not found",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StepIn:
    index: int
    agent: str
    kind: str
    content: str


@dataclass(frozen=True)
class ModeIn:
    code: str
    name: str
    definition: str = ""
    examples: str = ""


@dataclass
class Truncation:
    truncated: bool = False
    strategy: str = ""
    chars_before: int = 0
    chars_after: int = 0
    steps_total: int = 0
    steps_kept: int = 0
    steps_omitted: int = 0
    steps_shortened: int = 0
    gaps: list[list[int]] = field(default_factory=list)  # [first, last] step indexes omitted

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if not self.truncated:
            return "complete"
        parts = []
        if self.steps_omitted:
            parts.append(f"{self.steps_omitted} of {self.steps_total} steps omitted")
        if self.steps_shortened:
            parts.append(f"{self.steps_shortened} long steps shortened")
        return f"{self.strategy}: " + ", ".join(parts) + f" ({self.chars_before:,} -> {self.chars_after:,} chars)"


def _step_header(step: StepIn) -> str:
    who = step.agent or "?"
    kind = "" if step.kind in ("", "message") else f" ({step.kind})"
    return f"[step {step.index}] {who}{kind}:"


def _shorten(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    keep = max(limit - 60, 20)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail :]}", True


def _omitted(n: int) -> str:
    return f"[... {n} step{'s' if n != 1 else ''} omitted ...]"


def _salience(steps: Sequence[StepIn]) -> list[int]:
    """Each step's salience: keywords, a change of agent, content repeated from an earlier step."""
    seen: dict[str, int] = {}
    scores = []
    for k, s in enumerate(steps):
        score = len(SALIENT.findall(s.content[:5000]))
        if k and steps[k - 1].agent != s.agent:
            score += 1
        digest = hashlib.sha1(s.content.strip().encode("utf-8", "replace")).hexdigest()  # noqa: S324
        if digest in seen:
            score += 2
        seen[digest] = k
        scores.append(score)
    return scores


def _render_kept(steps: Sequence[StepIn], keep: set[int], short_blocks: list[str], info: Truncation) -> list[str]:
    """The kept steps in order, a marker in each gap (recorded in ``info.gaps``)."""
    n = len(steps)
    out: list[str] = []
    gap_start = None
    for k in range(n):
        if k in keep:
            if gap_start is not None:
                out.append(_omitted(k - gap_start))
                info.gaps.append([steps[gap_start].index, steps[k - 1].index])
                gap_start = None
            out.append(short_blocks[k])
        elif gap_start is None:
            gap_start = k
    if gap_start is not None:
        out.append(_omitted(n - gap_start))
        info.gaps.append([steps[gap_start].index, steps[n - 1].index])
    return out


def render_trace(steps: Sequence[StepIn], *, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[str, Truncation]:
    """The steps as text within ``max_chars``; see the module docstring for the strategy."""
    blocks = [f"{_step_header(s)}\n{s.content}" for s in steps]
    full = sum(len(b) + 2 for b in blocks)
    info = Truncation(chars_before=full, steps_total=len(steps))
    if full <= max_chars:
        text = "\n\n".join(blocks)
        info.chars_after = len(text)
        info.steps_kept = len(steps)
        return text, info
    info.truncated = True
    info.strategy = "head+tail+salient"
    # 1. No single step may take more than an eighth of the budget.
    per_step = max(max_chars // 8, 400)
    short_blocks = []
    for s in steps:
        content, cut = _shorten(s.content, per_step)
        info.steps_shortened += int(cut)
        short_blocks.append(f"{_step_header(s)}\n{content}")
    sizes = [len(b) + 2 for b in short_blocks]
    n = len(steps)
    keep: set[int] = set()
    used = 0
    reserve = 40 * min(n, 50)  # room for the elision markers

    def take(i: int) -> bool:
        nonlocal used
        if i in keep:
            return True
        if used + sizes[i] + reserve > max_chars:
            return False
        keep.add(i)
        used += sizes[i]
        return True

    # 2. The start and the end: the task, the setup, the outcome.
    quarter = max_chars // 4
    i = 0
    while i < n and used < quarter and take(i):
        i += 1
    j, tail_used = n - 1, 0
    while j >= 0 and tail_used < quarter:
        before = used
        if not take(j):
            break
        tail_used += used - before
        j -= 1
    # 3. The middle by salience: keywords, agent switches, repeated content.
    scores = _salience(steps)
    for k in sorted(range(n), key=lambda k: (-scores[k], k)):
        if scores[k] <= 0:
            break
        take(k)
    # 4. Render in order with markers for the gaps.
    out = _render_kept(steps, keep, short_blocks, info)
    text = "\n\n".join(out)
    info.steps_kept = len(keep)
    info.steps_omitted = n - len(keep)
    info.chars_after = len(text)
    return text, info


def render_definitions(modes: Sequence[ModeIn]) -> str:
    return "\n\n".join(f"{m.code} {m.name}: {m.definition.strip()}" for m in modes)


def render_examples(modes: Sequence[ModeIn], *, max_chars: int = 20_000) -> str:
    parts = [f"### {m.code} {m.name} ###\n{m.examples.strip()}" for m in modes if m.examples.strip()]
    text = "\n\n".join(parts) or "(none)"
    return _shorten(text, max_chars)[0]


@dataclass(frozen=True)
class FewShot:
    """A labelled trace from the project's adjudicated labels, shown to the model as an example."""

    excerpt: str
    present: Sequence[str]
    codes: Sequence[str]


def render_few_shot(examples: Sequence[FewShot]) -> str:
    if not examples:
        return ""
    parts = ["## Labelled examples from this project (agreed by human annotators)"]
    for n, ex in enumerate(examples, 1):
        answer = {"modes": [{"code": c, "present": c in ex.present} for c in ex.codes]}
        parts.append(f"### Example {n}\n{ex.excerpt}\nAgreed answer: {json.dumps(answer)}")
    return "\n\n".join(parts) + "\n"


def answer_format(codes: Sequence[str]) -> str:
    return ANSWER_FORMAT.replace("{{", "{").replace("}}", "}").replace("{codes}", ", ".join(codes))


def template_problems(text: str) -> list[str]:
    """What is wrong with a template (empty list when usable)."""
    problems = []
    if "{trace}" not in text:
        problems.append("the template must contain {trace}, where the trace goes")
    if "{answer_format}" not in text and "present" not in text:
        problems.append("the template must contain {answer_format} (or spell out the JSON answer format)")
    unknown = sorted(set(re.findall(r"\{[a-z_]+\}", text)) - set(PLACEHOLDERS))
    if unknown:
        problems.append(f"unknown placeholder(s) {', '.join(unknown)}; known: {', '.join(PLACEHOLDERS)}")
    return problems


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """Replace the known placeholders only, in one pass (trace text may contain braces)."""
    pattern = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
    return pattern.sub(lambda m: values.get(m.group(0)[1:-1], ""), template)


def build_messages(
    *,
    template: str,
    modes: Sequence[ModeIn],
    steps: Sequence[StepIn],
    max_chars: int = DEFAULT_MAX_CHARS,
    few_shot: Sequence[FewShot] = (),
) -> tuple[list[dict[str, str]], Truncation]:
    codes = [m.code for m in modes]
    trace_text, info = render_trace(steps, max_chars=max_chars)
    prompt = fill_template(
        template,
        {
            "definitions": render_definitions(modes),
            "examples": render_examples(modes),
            "few_shot": render_few_shot(few_shot),
            "answer_format": answer_format(codes),
            "mode_codes": ", ".join(codes),
            "trace": trace_text,
            "attribution_format": ATTRIBUTION_FORMAT,
        },
    )
    system = "You label failure modes in multi-agent system traces. You answer with JSON only."
    return [{"role": "system", "content": system}, {"role": "user", "content": prompt}], info


def repair_messages(
    messages: Sequence[Mapping[str, str]], *, raw: str, error: str, codes: Sequence[str]
) -> list[dict[str, str]]:
    return [
        *[dict(m) for m in messages],
        {"role": "assistant", "content": raw},
        {"role": "user", "content": REPAIR_MESSAGE.format(error=error, codes=", ".join(codes))},
    ]


def messages_hash(messages: Iterable[Mapping[str, str]]) -> str:
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- answers


class AnswerError(ValueError):
    """The answer cannot be used; the message says why (and is sent back to the model once)."""


@dataclass(frozen=True)
class ModeAnswer:
    code: str
    present: bool
    evidence_steps: tuple[int, ...]
    rationale: str


@dataclass(frozen=True)
class AttributionAnswer:
    agent: str
    step: int | None
    reason: str


@dataclass(frozen=True)
class Answer:
    task_success: str
    modes: tuple[ModeAnswer, ...]
    warnings: tuple[str, ...] = ()
    attribution: AttributionAnswer | None = None

    def as_dict(self) -> dict[str, Any]:
        extra = {"attribution": asdict(self.attribution)} if self.attribution is not None else {}
        return {
            **extra,
            "task_success": self.task_success,
            "modes": [
                {
                    "code": m.code,
                    "present": m.present,
                    "evidence_steps": list(m.evidence_steps),
                    "rationale": m.rationale,
                }
                for m in self.modes
            ],
            "warnings": list(self.warnings),
        }


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_TRUE = {"true", "yes", "y", "present", "1", "detected"}
_FALSE = {"false", "no", "n", "absent", "0", "not present", "none"}


def answer_json(raw: str) -> Any:
    """The JSON an answer holds (in a fence or among prose; a trailing comma forgiven); ``AnswerError``
    saying why when none parses. Also the behaviour search's (``annotations/corpus/behaviour_prompt.py``)."""
    text = raw.strip()
    if not text:
        raise AnswerError("the answer is empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    last_error = "no JSON object found"
    for cand in candidates:
        start = cand.find("{")
        end = cand.rfind("}")
        if start < 0 or end <= start:
            continue
        chunk = cand[start : end + 1]
        for attempt in (chunk, _TRAILING_COMMA.sub(r"\1", chunk)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError as exc:
                last_error = f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    raise AnswerError(last_error)


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower().rstrip(".")
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise AnswerError(f'{where}: "present" must be true or false, not {json.dumps(value)[:40]}')


def _norm_code(code: Any) -> str:
    """ "FM-1.1", "1.1 Disobey task specification" and "1.1:" are 1.1; a revised version's codes keep
    their letters ("1.2a", "X.1"): cutting them at the first letter made every answer miss them."""
    text = str(code).strip()
    m = re.match(r"^\s*(?:FM[-\s]?)?([0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)", text, re.IGNORECASE)
    return m.group(1) if m else text


def _mode_entries(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    modes = data.get("modes", data.get("failure_modes"))
    if isinstance(modes, list):
        out = []
        for n, entry in enumerate(modes):
            if not isinstance(entry, Mapping) or "code" not in entry:
                raise AnswerError(f'modes[{n}] must be an object with a "code"')
            out.append((_norm_code(entry["code"]), entry))
        return out
    if isinstance(modes, Mapping):
        return [(_norm_code(k), v) for k, v in modes.items()]
    # A flat object {"1.1": {...} | "yes", ...}
    flat = [(_norm_code(k), v) for k, v in data.items() if re.match(r"^\s*(FM[-\s]?)?\d+\.\d+", str(k))]
    if flat:
        return flat
    raise AnswerError('the answer has no "modes" list')


def parse_answer(raw: str, *, codes: Sequence[str], valid_steps: Iterable[int] = ()) -> Answer:
    """Parse and validate a judge answer; raise AnswerError when any mode is missing or unusable."""
    data = answer_json(raw)
    if not isinstance(data, Mapping):
        raise AnswerError("the answer must be a JSON object")
    warnings: list[str] = []
    steps = set(valid_steps)
    wanted = list(codes)
    found: dict[str, ModeAnswer] = {}
    for code, entry in _mode_entries(data):
        if code not in wanted:
            warnings.append(f"ignored unknown code {code}")
            continue
        if code in found:
            warnings.append(f"code {code} answered twice; kept the first")
            continue
        if isinstance(entry, Mapping):
            if "present" not in entry:
                raise AnswerError(f'mode {code} has no "present"')
            present = _bool(entry["present"], f"mode {code}")
            ev_raw = entry.get("evidence_steps", entry.get("evidence", [])) or []
            rationale = str(entry.get("rationale", "") or "").strip()
        else:
            present = _bool(entry, f"mode {code}")
            ev_raw, rationale = [], ""
        if not isinstance(ev_raw, list):
            ev_raw = [ev_raw]
        evidence = []
        for e in ev_raw:
            try:
                idx = int(str(e).strip().removeprefix("step").strip())
            except ValueError:
                warnings.append(f"mode {code}: dropped evidence {str(e)[:20]!r} (not a step number)")
                continue
            if steps and idx not in steps:
                warnings.append(f"mode {code}: dropped evidence step {idx} (no such step)")
                continue
            if idx not in evidence:
                evidence.append(idx)
        found[code] = ModeAnswer(code, present, tuple(evidence), rationale[:500])
    missing = [c for c in wanted if c not in found]
    if missing:
        raise AnswerError(f"no answer for mode(s) {', '.join(missing)}")
    ts = str(data.get("task_success", "unknown")).strip().lower()
    ts = {"true": "yes", "false": "no", "success": "yes", "failure": "no"}.get(ts, ts)
    if ts not in ("yes", "no", "unknown"):
        warnings.append(f"task_success {ts[:20]!r} read as unknown")
        ts = "unknown"
    attribution = _attribution(data, steps, warnings)
    return Answer(ts, tuple(found[c] for c in wanted), tuple(warnings), attribution)


def _attribution(data: Mapping[str, Any], steps: set[int], warnings: list[str]) -> AttributionAnswer | None:
    """The optional attribution: ``{"attribution": {"agent", "step", "reason"}}``, or Who&When's flat
    ``mistake_agent`` / ``mistake_step`` / ``mistake_reason``. A step the trace does not have is
    dropped with a warning (the agent is kept); no agent and no step means no attribution."""
    raw = data.get("attribution")
    if not isinstance(raw, Mapping):
        raw = {k: data.get(f"mistake_{k}") for k in ("agent", "step", "reason")}
    agent = " ".join(str(raw.get("agent") or "").split())[:200]
    step: int | None = None
    value = raw.get("step")
    if value not in (None, ""):
        try:
            step = int(str(value).strip().removeprefix("step").strip())
        except ValueError:
            warnings.append(f"attribution: dropped step {str(value)[:20]!r} (not a step number)")
        if step is not None and steps and step not in steps:
            warnings.append(f"attribution: dropped step {step} (no such step)")
            step = None
    if not agent and step is None:
        return None
    return AttributionAnswer(agent, step, str(raw.get("reason") or "").strip()[:500])
