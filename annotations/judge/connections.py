"""Provider connections of a project (writes and reads): name, base URL, models, prices, the key.

Decisions, for a team that uses this every day:

- The key is stored encrypted (``secrets.py``) or named as an environment variable of the worker
  (``key_env``; only names MAST_JUDGE_API_KEYS lists, each to its own base URLs). It is write-only:
  a form or API call may set or clear it, nothing ever reads it back (the page shows "stored (…abcd)").
- Changing a connection's base URL forgets its stored key unless a new one comes with the change:
  a manager cannot redirect a key another manager typed to a server of their own. The worker
  also sends a connection's key only to the connection's current base URL.
- No preset points a new connection anywhere by default: the presets fill the base URL of the
  server kind a manager picks (OpenAI, a local vLLM, Ollama or LiteLLM) and nothing else.
- A connection used by a run cannot be deleted (the run's history names it).
- What a connection's server refused, per model (``adaptations``: a 400 naming ``max_tokens``,
  a temperature, JSON mode, the ``system`` or ``developer`` role), is recorded the first time a
  run or a test meets it; the model's later runs and tests start in the accepted form, one
  request per trace. Moving the connection to another base URL forgets the record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from annotations.judge.providers import base, keys, provider_get
from annotations.judge.secrets import secret_decrypt, secret_encrypt, secret_hint
from annotations.judge.worker import allowed_keys, connection_adaptation_record
from annotations.models import LivePolicy, ProviderConnection
from traces.models import Project

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    base_url: str
    models: tuple[str, ...]
    note: str


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "https://api.openai.com/v1", ("o1", "o3-mini", "gpt-4o-mini"), "needs a key"),
    Preset("vllm", "vLLM on this machine", "http://127.0.0.1:8000/v1", (), "no key unless --api-key is set"),
    Preset("ollama", "Ollama on this machine", "http://127.0.0.1:11434/v1", ("llama3.1",), "no key"),
    Preset("litellm", "LiteLLM proxy on this machine", "http://127.0.0.1:4000/v1", (), "its master or virtual key"),
)
PRESETS_BY_KEY = {p.key: p for p in PRESETS}


def connection_adaptations(connection: ProviderConnection | None, model: str) -> list[str]:
    """What the connection's server refused for `model` (``JudgeRun.dropped_params`` values), in order.

    Read from the database, not from `connection`: a run or test may have recorded more since
    the caller loaded it."""
    if connection is None or connection.pk is None:
        return []
    known = ProviderConnection.objects.filter(pk=connection.pk).values_list("adaptations", flat=True).first()
    return list((known or {}).get(model.strip(), []))


def connection_list(*, project: Project) -> QuerySet[ProviderConnection]:
    return ProviderConnection.objects.filter(project=project).order_by("name")


def _models(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for m in (str(i).strip() for i in items):
        if m and m not in out:
            out.append(m[:200])
    return out


def _price(value, field: str, errors: dict[str, str]) -> Decimal:
    try:
        price = Decimal(str(value if value not in (None, "") else 0))
    except InvalidOperation:
        errors[field] = "a number (cost per million tokens)"
        return Decimal(0)
    if price < 0:
        errors[field] = "0 or more"
    return price


def connection_save(
    *,
    project: Project,
    by,
    name: str,
    base_url: str,
    models: str | list[str] | None = None,
    preset: str = "custom",
    api_key: str | None = None,
    key_env: str = "",
    clear_key: bool = False,
    price_in=0,
    price_out=0,
    connection: ProviderConnection | None = None,
) -> ProviderConnection:
    """Create (``connection`` None) or update a connection. ``api_key`` None keeps the stored key,
    a string replaces it; ``clear_key`` forgets it. A changed base URL forgets the stored key
    unless a new one is given (see the module docstring)."""
    errors: dict[str, str] = {}
    name = (name or "").strip()
    base_url = (base_url or "").strip().rstrip("/")
    key_env = (key_env or "").strip()
    if not name:
        errors["name"] = "a name, e.g. “OpenAI (lab account)”"
    if not base_url.startswith(("http://", "https://")) or keys._target(base_url) is None:
        errors["base_url"] = "an http(s) base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"
    if preset not in ProviderConnection.Preset.values:
        errors["preset"] = f"one of {', '.join(ProviderConnection.Preset.values)}"
    p_in, p_out = _price(price_in, "price_in", errors), _price(price_out, "price_out", errors)
    new_key = (api_key or "").strip() if api_key is not None else None
    if new_key and key_env:
        errors["key_env"] = "give either a key to store or an environment variable, not both"
    if key_env and "base_url" not in errors:
        if not keys.NAME_RE.fullmatch(key_env):
            errors["key_env"] = "the NAME of an environment variable (letters, digits, _), not the key"
        else:
            problems = keys.key_problems(name=key_env, base_url=base_url, allowed=allowed_keys())
            if problems:
                errors["key_env"] = next(iter(problems.values()))
    with transaction.atomic():
        if connection is None:
            conn = ProviderConnection(project=project, created_by=by)
        else:
            conn = ProviderConnection.objects.select_for_update().get(pk=connection.pk, project=project)
        clash = ProviderConnection.objects.filter(project=project, name=name).exclude(pk=conn.pk).exists()
        if clash:
            errors["name"] = f"the project has a connection named {name!r}"
        if errors:
            raise ValidationError(errors)
        moved = conn.pk is not None and conn.base_url.rstrip("/") != base_url
        if moved:
            conn.adaptations = {}  # another server: what the old one refused says nothing about it
        conn.name, conn.base_url, conn.preset = name, base_url, preset
        conn.models_list = _models(models)
        conn.price_in, conn.price_out = p_in, p_out
        if new_key:
            conn.key_encrypted, conn.key_hint, conn.key_env = secret_encrypt(new_key), secret_hint(new_key), ""
        elif clear_key or moved or key_env:
            conn.key_encrypted, conn.key_hint = "", ""
        conn.key_env = "" if new_key else key_env
        conn.full_clean(exclude=["project", "created_by"])
        conn.save()
    log.info("judge connection %s saved by %s (key %s)", conn.pk, getattr(by, "username", "?"), conn.key_source)
    return conn


def connection_delete(*, connection: ProviderConnection) -> None:
    if connection.runs.exists():
        raise ValidationError("runs used this connection; it is kept so their settings stay readable")
    if LivePolicy.objects.filter(connection=connection).exists():
        raise ValidationError("the project's live judge policy uses this connection; change the policy first")
    connection.delete()


def connection_api_key(connection: ProviderConnection) -> str:
    """The plain key for a call (worker and the connection test only)."""
    if connection.key_encrypted:
        return secret_decrypt(connection.key_encrypted)
    return keys.api_key_from_env(connection.key_env, base_url=connection.base_url, allowed=allowed_keys())


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    model: str
    message: str  # the model's answer, or the exact error
    latency_ms: int = 0
    dropped: tuple[str, ...] = ()


def connection_test(*, connection: ProviderConnection, model: str = "", timeout: float = 30.0) -> ProbeResult:
    """One tiny call ("Reply with OK") with the request adapting as a run's would (starting from what
    the connection recorded for the model, recording what it learns); the answer or the exact
    error of the server. The key is never part of the message."""
    model = (model or (connection.models_list or [""])[0]).strip()
    if not model:
        return ProbeResult(False, "", "no model to try: add a model name to the connection or pick one")
    known = connection_adaptations(connection, model)
    dropped: list[str] = []

    def learned(param: str) -> None:
        dropped.append(param)
        connection_adaptation_record(connection_id=connection.pk, model=model, param=param)

    try:
        api_key = connection_api_key(connection)
        call = base.Call(
            base_url=connection.base_url,
            api_key=api_key,
            model=model,
            temperature=0.0,
            max_tokens=256,
            timeout=timeout,
            dropped=frozenset(known),
        )
        done = base.complete_adapting(
            provider_get("openai"),
            call,
            [{"role": "user", "content": "Reply with the single word OK."}],
            json_mode=False,
            on_drop=learned,
        )
    except base.LLMError as exc:
        return ProbeResult(False, model, _scrub(str(exc), connection), dropped=tuple(dropped))
    text = done.text.strip() or "(an empty answer: a reasoning model may have used every token thinking)"
    return ProbeResult(True, model, text[:500], done.latency_ms, tuple(dropped))


def _scrub(message: str, connection: ProviderConnection) -> str:
    """A server may echo the key it refused (some do, partly): never pass it on."""
    try:
        key = connection_api_key(connection) if connection.key_encrypted else ""
    except base.LLMError:
        key = ""
    if key and len(key) >= 8:
        message = message.replace(key, "[key]")
    return message
