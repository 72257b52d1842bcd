"""What a judge provider is (pure, no Django): its settings check, its rater's name, one model call.

A provider is one module with a ``Provider`` subclass, registered in ``providers/__init__.py``.
Two kinds exist:

- per trace (``per_trace = True``, e.g. ``openai_chat``): a prompted model. The run gets the
  project's prompt version (and few-shot examples); the worker (``judge/worker.py``) builds the
  messages of one trace, answers from the cache or calls ``complete`` under the retry policy
  below, parses the answer and writes it. A new LLM API is one more of these.
- whole run (``per_trace = False``, the offline baseline): no prompt and no per-trace call; one
  task trains on the project's labels and labels every trace (``judge/baseline.py``).

The errors say what the worker does next: ``TransientError`` is retried with backoff,
``PermanentError`` stops the run with its message, ``UnsupportedParameter`` (a 400 naming one
request parameter: ``max_tokens``, ``temperature``, ``response_format``..., or refusing the role
the instructions came in: ``system_role``, ``developer_role``) makes the worker ask again once in
the form the server takes and remember that for the run and its connection's model
(``complete_adapting``; ``ADAPTATIONS`` says in words what each one changes).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, TypeVar

from annotations.judge import prompting

T = TypeVar("T")


class LLMError(Exception):
    pass


class TransientError(LLMError):
    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


class PermanentError(LLMError):
    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class UnsupportedParameter(PermanentError):
    """HTTP 400 naming a request parameter the model does not take; ``param`` is its name."""

    def __init__(self, message: str, *, param: str, status: int | None = 400):
        super().__init__(message, status=status)
        self.param = param


class JsonModeUnsupported(UnsupportedParameter):
    def __init__(self, message: str, *, status: int | None = 400):
        super().__init__(message, param="response_format", status=status)


# What the request does instead, once the server refused a parameter or role (dropped_params values).
ADAPTATIONS = {
    "max_tokens": "max_tokens refused: the limit is sent as max_completion_tokens",
    "max_completion_tokens": "max_completion_tokens refused: the limit is sent as max_tokens",
    "temperature": "temperature refused: left out (the server's default)",
    "response_format": "JSON mode refused: asked without response_format",
    "system_role": "the system role refused: the instructions are sent as a developer message",
    "developer_role": "the developer role refused too: the instructions are folded into the first user message",
}


def adaptations_describe(params: Sequence[str]) -> list[str]:
    """The adaptations in words, in the order they were learned (an unknown name as itself)."""
    return [ADAPTATIONS.get(p, f"{p} refused: left out") for p in params]


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: int
    tokens_reasoning: int = 0  # part of tokens_out the model spent thinking (o1/o3/gpt-5 report it)


@dataclass(frozen=True)
class RunConfig:
    """The provider settings of a run as a manager gave them (form, API or ``prelabel``)."""

    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    baseline_source: str = "auto"


@dataclass(frozen=True)
class Call:
    """The settings of one model call; ``api_key`` is the value, read by the worker per trace."""

    base_url: str
    api_key: str
    model: str
    temperature: float
    max_tokens: int
    timeout: float
    # What the server refused for this run ("max_tokens", "temperature", "system_role", ...):
    # not sent, or sent in the form it takes (``ADAPTATIONS``).
    dropped: frozenset[str] = frozenset()


class Provider:
    name: ClassVar[str]  # the run's ``provider`` value
    rater_kind: ClassVar[str]  # the kind (Rater.Kind value) of the rater its labels are filed under
    per_trace: ClassVar[bool] = True

    def validate(self, config: RunConfig, *, allowed_keys: Mapping[str, Sequence[str]]) -> dict[str, str]:
        """Errors per field of `config` ({} when the run may be created); `allowed_keys` is
        MAST_JUDGE_API_KEYS parsed (``providers/keys.py``)."""
        return {}

    def rater_name(self, *, model: str, prompt_number: int | None = None, trained_on: str = "") -> str:
        """The name of the rater a run's labels are filed under (one rater per name)."""
        raise NotImplementedError

    # Prompt building and answer parsing: a per-trace provider may bring its own (the MAST
    # official judge does); ``None`` means the project's prompt (``prompting.build_messages``)
    # and answer format (``prompting.parse_answer``).
    uses_project_prompt: ClassVar[bool] = True
    prompt_identity: ClassVar[str] = ""  # part of the cache key when the provider builds the prompt
    json_mode: ClassVar[bool] = True  # whether to ask for JSON mode at all

    def build_messages(
        self,
        *,
        template: str,
        modes: Sequence[prompting.ModeIn],
        steps: Sequence[prompting.StepIn],
        max_chars: int,
        few_shot: Sequence[prompting.FewShot] = (),
    ) -> tuple[list[dict[str, str]], prompting.Truncation]:
        """The messages of one trace (default: the run's prompt template, ``prompting.build_messages``)."""
        return prompting.build_messages(
            template=template, modes=modes, steps=steps, max_chars=max_chars, few_shot=few_shot
        )

    def parse_answer(self, raw: str, *, codes: Sequence[str], valid_steps: Sequence[int]) -> prompting.Answer:
        """The answer as labels; ``prompting.AnswerError`` when it cannot be used. Modes the
        returned ``Answer`` leaves out are unknown: no label is written for them."""
        return prompting.parse_answer(raw, codes=codes, valid_steps=valid_steps)

    def repair_messages(
        self, messages: list[dict[str, str]], *, raw: str, error: str, codes: Sequence[str]
    ) -> list[dict[str, str]] | None:
        """The one follow-up request after an unusable answer (None: no repair, the item fails)."""
        return prompting.repair_messages(messages, raw=raw, error=error, codes=codes)

    def complete(self, call: Call, messages: Sequence[Mapping[str, str]], *, json_mode: bool) -> Completion:
        """One model call (no retries: the worker's policy retries TransientError)."""
        raise NotImplementedError(f"{self.name} labels a whole run at once; it answers no single call")


def complete_adapting(
    provider: Provider,
    call: Call,
    messages: Sequence[Mapping[str, str]],
    *,
    json_mode: bool,
    on_drop: Callable[[str], None],
) -> Completion:
    """``provider.complete``; a 400 naming a parameter is asked again without it, once per parameter.

    ``on_drop(param)`` remembers it for the run (the worker writes it to ``JudgeRun.dropped_params``);
    a parameter already dropped that is named again is a real refusal and stops the run."""
    dropped = set(call.dropped)
    if not json_mode:
        dropped.add("response_format")
    while True:
        try:
            return provider.complete(_with_dropped(call, dropped), messages, json_mode="response_format" not in dropped)
        except UnsupportedParameter as exc:
            if exc.param in dropped:
                raise
            dropped.add(exc.param)
            on_drop(exc.param)


def _with_dropped(call: Call, dropped: set[str]) -> Call:
    return replace(call, dropped=frozenset(dropped - {"response_format"}))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded; the first retry of a server error is prompt.

    A 5xx, a timeout or a dropped connection is usually over at once, and a run's last traces wait
    on their slowest retry (the run ends with its last trace): the first retry waits a short
    jittered ``first`` seconds, later ones ``base`` x 2^(n-1), capped. A 429 (the server asks us to
    slow down) starts at ``base`` instead; a Retry-After is always honoured."""

    max_attempts: int = 5
    base: float = 0.5
    cap: float = 30.0
    first: float = 0.05

    def delay(
        self,
        attempt: int,
        retry_after: float | None = None,
        rng: random.Random | None = None,
        *,
        status: int | None = None,
    ) -> float:
        """Full jitter on an exponential ceiling; never less than what Retry-After asks."""
        ceiling = min(self.cap, self.base * (2 ** (attempt - 1)))
        if attempt == 1 and status != 429:
            ceiling = min(ceiling, self.first)
        jittered = (rng or random).uniform(ceiling / 2, ceiling)
        return max(jittered, retry_after or 0.0)


def with_retries(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    before_attempt: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call`, retrying TransientError up to policy.max_attempts; others pass through."""
    attempt = 0
    while True:
        attempt += 1
        if before_attempt:
            before_attempt(attempt)
        try:
            return call()
        except TransientError as exc:
            if attempt >= policy.max_attempts:
                raise TransientError(
                    f"gave up after {attempt} attempts: {exc}", retry_after=exc.retry_after, status=exc.status
                ) from exc
            sleep(policy.delay(attempt, exc.retry_after, status=exc.status))
