"""The OpenAI-compatible chat-completions provider, through the `openai` library.

Works with OpenAI, vLLM, Ollama, LiteLLM and any server speaking /v1/chat/completions.
The library's own retries are off (max_retries=0): our policy (``base.with_retries``) is explicit.

- Transient faults (timeouts, dropped connections, 408/409/429, 5xx, a malformed response body)
  raise ``TransientError``; ``base.with_retries`` retries them with exponential backoff and full
  jitter, bounded, waiting at least what a 429's Retry-After (or retry-after-ms) asks.
- Permanent faults (400, 401, 403, 404 model not found, 422, a missing key) raise
  ``PermanentError``: retrying cannot help, the run stops with the message.
- A 400 that names a request parameter (``max_tokens``, ``temperature``, ``response_format``,
  ...) raises ``UnsupportedParameter`` so the caller asks again once without it and remembers
  that for the run (``base.complete_adapting``).
- A 400 refusing the role the prompt's instructions were sent in (``is_role_refusal``: OpenAI's
  o1-mini and o1-preview, also on Azure: "Unsupported value: 'messages[0].role' does not support
  'system' with this model." with param ``messages[0].role``; an Azure API version before
  ``developer`` existed: "Invalid value: 'developer'. Supported values are: 'system', ...";
  vLLM serving Gemma: "System role not supported", param null; a chat template that then rejects
  the unknown role: "Conversation roles must alternate ...") raises ``UnsupportedParameter``
  with ``param`` ``system_role`` or ``developer_role`` (whichever role that request used). The
  next request sends the system text as a ``developer`` message, and after a refusal of that
  too, folded into the first user message (``adapt_roles``): nothing of the prompt is dropped.

Request parameters adapt to the model (``request_kwargs``): reasoning models (o1, o3, o4, gpt-5
families, by name) get ``max_completion_tokens`` and no ``temperature`` (they accept only the
default); others get ``max_tokens`` and the run's temperature; a dropped ``max_tokens`` becomes
``max_completion_tokens`` and back. Reasoning tokens are read from
``usage.completion_tokens_details.reasoning_tokens``.

openai 3.x (pinned in requirements.txt) sends through its own HTTP package; we never import it:
the client is ``openai.DefaultHttpxClient`` (the library's defaults, redirects off) and the
timeout ``openai.Timeout``. What we rely on: ``openai.OpenAI(base_url, api_key, timeout,
max_retries, http_client)``, its ``post(path, cast_to=bytes, content=...)`` (the request body
encoded by us with orjson, the answer parsed by ``parse_completion``), the exception classes
``APITimeoutError``, ``APIConnectionError``, ``APIStatusError`` (``status_code``, ``body``,
``response.headers``) and ``APIResponseValidationError``; tests/annotations/judge/test_providers.py
covers each against a real server.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import openai
import orjson

from annotations.judge.providers import keys
from annotations.judge.providers.base import (
    Call,
    Completion,
    JsonModeUnsupported,
    LLMError,
    PermanentError,
    Provider,
    RunConfig,
    TransientError,
    UnsupportedParameter,
)

# Model names of the reasoning families that take max_completion_tokens and only the default temperature.
REASONING_MODEL = re.compile(r"(^|/)(o[1-9]|gpt-5)([-.:_]|$)", re.IGNORECASE)
ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "response_format")
ROLE_PARAM = re.compile(r"^messages\[\d+\]\.role$")
# The words of a 400 about a message role, from the servers named in the module docstring.
ROLE_REFUSAL = re.compile(
    r"messages\[\d+\]\.role"
    r"|\b(system|developer)\b[^.]{0,40}\b(role|roles|message|messages|prompt|prompts)\b[^.]{0,40}"
    r"\b(not supported|unsupported|not allowed|invalid)"
    r"|\b(unsupported|invalid|not supported|does not support|unknown)\b[^.]{0,40}\b(role|roles)\b"
    r"|\b(does not support|invalid value:?|unknown role:?|unexpected role:?)\s*'?(system|developer)\b"
    r"|roles must alternate",
    re.IGNORECASE,
)
FOLD_SEPARATOR = "\n\n"
CHAT_PATH = "/chat/completions"

_clients: dict[tuple[str, str, float], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    # One client (one connection pool) per server and key, shared by the worker's threads:
    # building a client costs milliseconds of CPU (TLS context), which adds up over 1,000 calls.
    key = (base_url, api_key, float(timeout))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                base_url=base_url or None,
                api_key=api_key,
                timeout=openai.Timeout(timeout, connect=min(timeout, 10.0)),
                max_retries=0,
                # No redirects: the key may go only to the base URL it was given for.
                http_client=openai.DefaultHttpxClient(follow_redirects=False),
            )
            _clients[key] = client
        return client


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    detail = ""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        detail = err.get("message", "") if isinstance(err, Mapping) else str(err)
    return detail or exc.message or ""


def _body_param(exc: openai.APIStatusError) -> str:
    """The ``param`` field of an error body ("" when there is none)."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, Mapping) else None
    param = err.get("param") if isinstance(err, Mapping) else None
    return param if isinstance(param, str) else ""


def _named_param(exc: openai.APIStatusError, detail: str) -> str | None:
    """The request parameter a 400 names: the body's ``param`` field, else the first one the message quotes."""
    param = _body_param(exc)
    if param in ADAPTABLE:
        return param
    low = detail.lower()
    found = [(low.find(p), p) for p in ADAPTABLE if re.search(rf"\b{p}\b", low)]
    return min(found)[1] if found else None


def is_role_refusal(exc: openai.APIStatusError, detail: str) -> bool:
    """Whether a 400 refuses a message role (the body's ``param``, else the words of its message;
    a body naming another parameter, such as ``max_tokens``, is about that one)."""
    param = _body_param(exc)
    if ROLE_PARAM.match(param):
        return True
    return param not in ADAPTABLE and bool(ROLE_REFUSAL.search(detail))


def classify(exc: BaseException, *, instructions_role: str = "") -> LLMError:
    """Map an exception of the openai library to TransientError / PermanentError.

    ``instructions_role``: the role the request sent the system text in ("system", "developer";
    "" when folded or absent): a 400 refusing a role is then ``UnsupportedParameter`` with
    ``param`` ``<role>_role``; without one there is nothing left to adapt."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return TransientError("the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientError(f"connection error: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _status_message(exc)
        if status in (408, 409, 429) or status >= 500:
            return TransientError(
                f"HTTP {status}: {detail}"[:500], retry_after=retry_after_seconds(exc.response.headers), status=status
            )
        if status == 400:
            if instructions_role and is_role_refusal(exc, detail):
                return UnsupportedParameter(
                    f"HTTP 400: {detail}"[:500], param=f"{instructions_role}_role", status=status
                )
            param = _named_param(exc, detail)
            if param == "response_format":
                return JsonModeUnsupported(f"HTTP 400: {detail}"[:500], status=status)
            if param:
                return UnsupportedParameter(f"HTTP 400: {detail}"[:500], param=param, status=status)
        what = {
            400: "the server refused the request (bad request)",
            401: "the API key was refused (unauthorized)",
            403: "the API key may not use this model (forbidden)",
            404: "the model or endpoint does not exist (not found)",
            422: "the server could not process the request",
        }.get(status, "the server refused the request")
        return PermanentError(f"HTTP {status}: {what}: {detail}"[:500], status=status)
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return TransientError(f"malformed response: {exc}"[:300])
    return PermanentError(f"{type(exc).__name__}: {exc}"[:500])


def adapt_roles(messages: Sequence[Mapping[str, str]], dropped: frozenset[str]) -> list[dict[str, str]]:
    """The messages in the form the server accepts: the system text as ``system``; after a refusal
    of that (``system_role`` dropped) as ``developer``; after a refusal of that too
    (``developer_role``) folded into the first user message, every character of it kept:
    the system texts in order, then the user's text, separated by a blank line."""
    out = [dict(m) for m in messages]
    if "system_role" not in dropped:
        return out
    if "developer_role" not in dropped:
        return [{**m, "role": "developer"} if m.get("role") == "system" else m for m in out]
    system = [str(m.get("content", "")) for m in out if m.get("role") in ("system", "developer")]
    rest = [m for m in out if m.get("role") not in ("system", "developer")]
    if not system:
        return rest
    first_user = next((i for i, m in enumerate(rest) if m.get("role") == "user"), None)
    if first_user is None:
        return [{"role": "user", "content": FOLD_SEPARATOR.join(system)}, *rest]
    folded = FOLD_SEPARATOR.join([*system, str(rest[first_user].get("content", ""))])
    rest[first_user] = {**rest[first_user], "content": folded}
    return rest


def instructions_role(messages: Sequence[Mapping[str, str]]) -> str:
    """The role the request carries the system text in ("" when it has none of its own)."""
    return next((str(m["role"]) for m in messages if m.get("role") in ("system", "developer")), "")


def request_kwargs(call: Call, messages: Sequence[Mapping[str, str]], *, json_mode: bool) -> dict[str, Any]:
    """The body of one request, adapted to the model and to what the server refused before."""
    reasoning = bool(REASONING_MODEL.search(call.model))
    kwargs: dict[str, Any] = {"model": call.model, "messages": adapt_roles(messages, call.dropped)}
    preferred, other = ("max_completion_tokens", "max_tokens") if reasoning else ("max_tokens", "max_completion_tokens")
    token_param = other if preferred in call.dropped else preferred
    if token_param not in call.dropped:
        kwargs[token_param] = call.max_tokens
    if not reasoning and "temperature" not in call.dropped:
        kwargs["temperature"] = call.temperature
    if json_mode:
        kwargs["response_format"] = {"type": "json_object"}
    return kwargs


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_completion(raw: bytes, *, latency_ms: int) -> Completion:
    """A chat-completions response body -> Completion; a body without a message is TransientError.

    Read with orjson as plain data: building the library's pydantic models for every answer cost
    the worker more CPU than the HTTP exchange (bench/bench_judge.py)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TransientError(f"malformed response: not JSON ({exc})"[:300]) from exc
    choices = body.get("choices") if isinstance(body, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise TransientError("malformed response: no choices")
    text = message.get("content") or ""
    if not isinstance(text, str):
        raise TransientError(f"malformed response: the message content is a {type(text).__name__}, not text")
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    return Completion(
        text=text,
        tokens_in=_int(usage.get("prompt_tokens")),
        tokens_out=_int(usage.get("completion_tokens")),
        latency_ms=latency_ms,
        tokens_reasoning=_int(details.get("reasoning_tokens")),
    )


def chat_complete(call: Call, messages: Sequence[Mapping[str, str]], *, json_mode: bool) -> Completion:
    """One HTTP request; raises TransientError / PermanentError / UnsupportedParameter.

    The body goes through the client's ``post`` as JSON bytes we encode (``request_kwargs`` is
    already the wire format), not through ``chat.completions.create``, whose per-call type
    transform of the messages was the largest CPU cost of a call; auth, timeouts, status errors
    and the connection pool are the client's as before."""
    client = _client(call.base_url, call.api_key, call.timeout)
    body = request_kwargs(call, messages, json_mode=json_mode)
    content = orjson.dumps(body)
    started = time.monotonic()
    try:
        raw = client.post(CHAT_PATH, cast_to=bytes, content=content)
    except Exception as exc:  # noqa: BLE001 - every failure is classified, none swallowed
        raise classify(exc, instructions_role=instructions_role(body["messages"])) from exc
    return parse_completion(raw, latency_ms=int((time.monotonic() - started) * 1000))


class OpenAIChat(Provider):
    """Any server speaking /v1/chat/completions, with an optional key from MAST_JUDGE_API_KEYS."""

    name = "openai"
    rater_kind = "llm"

    def validate(self, config: RunConfig, *, allowed_keys: Mapping[str, Sequence[str]]) -> dict[str, str]:
        errors: dict[str, str] = {}
        if not config.base_url.startswith(("http://", "https://")):
            errors["base_url"] = "an http(s) URL of an OpenAI-compatible server, e.g. https://api.openai.com/v1"
        if not config.model.strip():
            errors["model"] = "the model name, e.g. gpt-4o-mini"
        name = config.api_key_env
        if name and not name.replace("_", "").isalnum():
            errors["api_key_env"] = "the NAME of an environment variable (letters, digits, _), not the key"
        elif "base_url" not in errors:
            errors.update(keys.key_problems(name=name.strip(), base_url=config.base_url, allowed=allowed_keys))
        return errors

    def rater_name(self, *, model: str, prompt_number: int | None = None, trained_on: str = "") -> str:
        return f"{model} · prompt v{prompt_number}"

    def complete(self, call: Call, messages: Sequence[Mapping[str, str]], *, json_mode: bool) -> Completion:
        return chat_complete(call, messages, json_mode=json_mode)
