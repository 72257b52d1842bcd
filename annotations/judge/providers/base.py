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
``PermanentError`` stops the run with its message, ``JsonModeUnsupported`` makes the worker ask
again without JSON mode and remember that for the run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

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


class JsonModeUnsupported(PermanentError):
    pass


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: int


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

    def complete(self, call: Call, messages: Sequence[Mapping[str, str]], *, json_mode: bool) -> Completion:
        """One model call (no retries: the worker's policy retries TransientError)."""
        raise NotImplementedError(f"{self.name} labels a whole run at once; it answers no single call")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base: float = 0.5
    cap: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Full jitter on an exponential ceiling; never less than what Retry-After asks."""
        ceiling = min(self.cap, self.base * (2 ** (attempt - 1)))
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
            sleep(policy.delay(attempt, exc.retry_after))
