"""The per-trace hot path of a judge run (writes): load, cache, call, parse, write one result.

``judge_item_process`` is what one ``annotations.prelabel_trace`` task does (see ``dispatch.py``
for how a run moves): it builds the prompt, answers from the cache or calls the run's provider
with the retry policy (transient faults back off, permanent ones stop the run), parses the answer
with one repair request, and writes the annotation + the item's result in ONE transaction after
re-checking the item's state under lock, so a task delivered twice writes one result.

The API key is read here, per trace, and only when MAST_JUDGE_API_KEYS allows the run's variable
to go to the run's base URL (``providers/keys.py``): a run row written straight to the database
cannot make the worker send another variable anywhere.

The per-trace statements are plain SQL (``sql.py``) and the run's unchanging settings are cached
per worker process (``_frozen_run``): the worker's CPU per trace bounds a run's throughput.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone

from annotations.judge import prompting
from annotations.judge import sql as judge_sql
from annotations.judge.attribution import judge_attribution_write
from annotations.judge.dispatch import (
    CELERY,
    Dispatcher,
    claim_handed,
    claim_next_statement,
    finish_if_idle,
    heartbeat_seconds,
    run_stop,
    running_lease_parts,
    running_lease_seconds,
)
from annotations.judge.providers import base, keys, provider_get
from annotations.judge.secrets import secret_decrypt
from annotations.labels.bulk import machine_annotation_write
from annotations.models import JudgeCache, JudgeItem, JudgeRun, ProviderConnection, Rater
from taxonomy.models import FailureMode
from taxonomy.selectors import version_modes
from traces.jobs import database_connection_lost
from traces.sqlrows import Statement, sql_execute_batch, sql_insert_statement, sql_update_statement

log = logging.getLogger(__name__)


class JudgeStopped(Exception):
    """The run was cancelled, paused or failed while this item was being worked on."""


def max_chars() -> int:
    return int(getattr(settings, "MAST_JUDGE_MAX_CHARS", prompting.DEFAULT_MAX_CHARS))


def allowed_keys() -> dict[str, tuple[str, ...]]:
    """MAST_JUDGE_API_KEYS parsed (providers/keys.py); a malformed setting is a configuration error."""
    try:
        return keys.parse_allowed(getattr(settings, keys.SETTING, ""))
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


def retry_policy() -> base.RetryPolicy:
    return base.RetryPolicy(
        max_attempts=int(getattr(settings, "MAST_JUDGE_MAX_ATTEMPTS", 5)),
        base=float(getattr(settings, "MAST_JUDGE_BACKOFF_BASE", 0.5)),
        cap=float(getattr(settings, "MAST_JUDGE_BACKOFF_CAP", 30.0)),
        first=float(getattr(settings, "MAST_JUDGE_BACKOFF_FIRST", 0.05)),
    )


def _cost(run: JudgeRun, tokens_in: int, tokens_out: int) -> Decimal:
    return (Decimal(tokens_in) * run.price_in + Decimal(tokens_out) * run.price_out) / Decimal(1_000_000)


def _cache_key(*, content_hash: str, prompt_id: int | str, model: str, params_hash: str) -> str:
    return hashlib.sha256(f"{content_hash}|{prompt_id}|{model}|{params_hash}".encode()).hexdigest()


def _params_hash(run: JudgeRun, messages: list[dict[str, str]]) -> str:
    params = {
        "temperature": run.temperature,
        "max_tokens": run.max_tokens,
        "messages": prompting.messages_hash(messages),
    }
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


class _Attempts:
    """Renews the item's lease and checks the run is still running before each attempt and sleep."""

    def __init__(self, item: JudgeItem, run: JudgeRun):
        self.item, self.run = item, run
        self.n = 0  # attempts made; written with the result (the claim gave the first one a fresh lease)

    def _renew(self, extra: float = 0.0) -> None:
        lease = timezone.now() + timedelta(seconds=running_lease_seconds(self.run) + extra)
        fields: dict[str, Any] = {"lease_until": lease}
        alive = JudgeItem.objects.filter(
            pk=self.item.pk, state=JudgeItem.State.RUNNING, claim=self.item.claim, run__state=JudgeRun.State.RUNNING
        ).update(**fields)
        if not alive:
            raise JudgeStopped()

    def before(self, attempt: int) -> None:
        self.n += 1
        if attempt == 1 and self.n > 1:  # a repair request: a new call, a new lease
            self._renew()

    def sleep(self, seconds: float) -> None:
        self._renew(extra=seconds)
        time.sleep(seconds)


def connection_adaptation_record(*, connection_id: int | None, model: str, param: str) -> None:
    """The connection's server refused `param` for `model`: record it (``ProviderConnection.adaptations``),
    so the model's next runs and tests on this connection start in the accepted form."""
    if connection_id is None or not model:
        return
    with transaction.atomic():
        conn = ProviderConnection.objects.select_for_update().filter(pk=connection_id).only("adaptations").first()
        if conn is None:
            return
        known = dict(conn.adaptations or {})
        if param in known.get(model, []):
            return
        known[model] = [*known.get(model, []), param]
        ProviderConnection.objects.filter(pk=connection_id).update(adaptations=known)
    log.info("judge connection %s: %s refused by model %s; later runs start without it", connection_id, param, model)


def _remember_dropped(run: JudgeRun, param: str) -> None:
    """A 400 named `param`: leave it out (or send the instructions in the role the server takes) for
    the rest of the run, and record it on the run's connection for the model's later runs (JSON
    mode has its own column on the run)."""
    connection_adaptation_record(connection_id=run.connection_id, model=run.model, param=param)
    if param == "response_format":
        JudgeRun.objects.filter(pk=run.pk).update(json_mode=False)
        run.json_mode = False
        return
    with transaction.atomic():
        row = JudgeRun.objects.select_for_update().filter(pk=run.pk).values_list("dropped_params", flat=True).first()
        dropped = list(row or [])
        if param not in dropped:
            JudgeRun.objects.filter(pk=run.pk).update(dropped_params=[*dropped, param])
    run.dropped_params = [*run.dropped_params, param] if param not in run.dropped_params else run.dropped_params


@contextlib.contextmanager
def _heartbeat(item: JudgeItem, run: JudgeRun) -> Iterator[None]:
    """While the model answers (up to the run's timeout), renew the item's lease every heartbeat
    from a thread of its own, so the lease can stay short: a dead worker stops beating and its
    item is claimed again within running_lease_seconds(). The thread opens a database connection
    only when a call outlasts one heartbeat, and closes it."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(heartbeat_seconds()):
                lease = timezone.now() + timedelta(seconds=running_lease_seconds(run))
                if not judge_sql.lease_renew(item.pk, item.claim, lease):
                    return  # released, stopped or claimed again: nothing of ours to keep alive
        except Exception:  # noqa: BLE001 - a missed beat costs at worst a second claim, never the call
            log.warning("judge item %s: could not renew its lease", item.pk, exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=beat, name=f"judge-heartbeat-{item.pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _call(run: JudgeRun, messages: list[dict[str, str]], attempts: _Attempts, api_key: str) -> base.Completion:
    provider = provider_get(run.provider)

    def once() -> base.Completion:
        call = base.Call(
            base_url=run.base_url,
            api_key=api_key,
            model=run.model,
            temperature=run.temperature,
            max_tokens=run.max_tokens,
            timeout=run.timeout,
            dropped=frozenset(run.dropped_params or ()),
        )
        json_mode = provider.json_mode and run.json_mode is not False
        return base.complete_adapting(
            provider, call, messages, json_mode=json_mode, on_drop=lambda p: _remember_dropped(run, p)
        )

    def beating() -> base.Completion:
        with _heartbeat(attempts.item, run):
            return once()

    result = base.with_retries(beating, policy=retry_policy(), before_attempt=attempts.before, sleep=attempts.sleep)
    if run.json_mode is None and provider.json_mode:
        JudgeRun.objects.filter(pk=run.pk, json_mode__isnull=True).update(json_mode=True)
        run.json_mode = True
    return result


_frozen_runs: OrderedDict[int, JudgeRun] = OrderedDict()
_frozen_runs_lock = threading.Lock()
FROZEN_RUNS_KEPT = 32


def _frozen_run(run_id: int) -> JudgeRun | None:
    """The run with its prompt, taxonomy version and rater, cached per process.

    What a task reads of a run besides its state, JSON mode and spend (which ``_load_item`` reads
    fresh every time) is written by judge_run_create and never changed: provider settings, prompt,
    few-shot examples, budget, rater. Loading it once per process instead of once per trace is
    the largest CPU saving of the judge's hot path (bench/bench_judge.py). Run ids are never
    reused (PostgreSQL sequences), so an entry cannot go stale."""
    with _frozen_runs_lock:
        run = _frozen_runs.get(run_id)
        if run is not None:
            _frozen_runs.move_to_end(run_id)
            return run
    run = JudgeRun.objects.select_related("prompt", "taxonomy_version", "rater").filter(pk=run_id).first()
    if run is not None:
        with _frozen_runs_lock:
            _frozen_runs[run_id] = run
            while len(_frozen_runs) > FROZEN_RUNS_KEPT:
                _frozen_runs.popitem(last=False)
    return run


def _load_item(
    item_id: int, claim: int | None = None
) -> tuple[JudgeItem, JudgeRun, str, list[prompting.StepIn]] | None:
    """(item, run, trace content hash, steps) in one round trip plus the per-process frozen run; None if gone.
    The item, when still running under ``claim``, gets the running lease (``running_lease_seconds``).

    The run is a copy of the frozen one with its live fields (state, JSON mode, spend) from the
    database, so the task may update it in memory without touching other tasks' copies."""
    row = judge_sql.load_item(item_id, claim=claim, now=timezone.now(), lease=running_lease_parts())
    if row is None:
        return None
    frozen = _frozen_run(row["run_id"])
    if frozen is None:
        return None
    run = copy.copy(frozen)
    run.state, run.json_mode = row["run_state"], row["json_mode"]
    run.dropped_params = row["dropped_params"]
    run.tokens_in, run.tokens_out, run.cost = row["tokens_in"], row["tokens_out"], row["cost"]
    run._connection_key = row["connection_key"]  # (key_encrypted, key_env, base_url) of its connection, live
    item = JudgeItem(pk=item_id, run_id=run.pk, trace_id=row["trace_id"], state=row["state"], claim=row["claim"])
    return item, run, row["content_hash"], row["steps"]


def _api_key(run: JudgeRun) -> str:
    """The key for this call: the connection's (stored, or its environment variable), else the run's variable.

    A connection's key goes only to the connection's current base URL: a run whose base URL
    differs (the connection was pointed elsewhere after the run was created) sends nothing."""
    if run.connection_id is None:
        return keys.api_key_from_env(run.api_key_env, base_url=run.base_url, allowed=allowed_keys())
    key_encrypted, key_env, base_url = run._connection_key or ("", "", None)
    if base_url is None:
        raise base.PermanentError("the run's connection was deleted")
    if base_url.rstrip("/") != run.base_url.rstrip("/"):
        raise base.PermanentError(
            f"the connection now points at {base_url}, not at the run's {run.base_url}; its key is not sent elsewhere"
        )
    if key_encrypted:
        return secret_decrypt(key_encrypted)
    return keys.api_key_from_env(key_env, base_url=run.base_url, allowed=allowed_keys())


def judge_item_process(*, item_id: int, claim: int | None = None, dispatcher: Dispatcher = CELERY) -> str:
    """Label one trace (idempotent). Returns what happened: done, failed, cached, skipped, stopped."""
    loaded = _load_item(item_id, claim)
    if loaded is None:
        return "skipped"
    item, run, content_hash, steps = loaded
    if item.state != JudgeItem.State.RUNNING or (claim is not None and item.claim != claim):
        return "skipped"  # done already, released, or a stale duplicate of a re-claimed item
    if run.state != JudgeRun.State.RUNNING:
        _release(item)
        return "stopped"
    try:
        outcome = _process(item, run, content_hash, steps, dispatcher)
    except JudgeStopped:
        _release(item)
        return "stopped"
    except base.PermanentError as exc:
        _release(item)
        message = f"Stopped: {exc} (server {run.base_url}, model {run.model}). Fix it and resume the run."
        run_stop(run_id=run.pk, message=message)
        return "stopped"
    except Exception as exc:  # a bug must not leave the item claimed for ever
        if database_connection_lost(exc):
            raise  # not the trace's fault: its lease runs out and the sweep claims it again
        log.exception("judge item %s crashed", item_id)
        _item_failed(item, run, dispatcher, error=f"internal error: {type(exc).__name__}: {exc}"[:1000])
        outcome = "failed"
    return outcome


def _release(item: JudgeItem) -> None:
    JudgeItem.objects.filter(pk=item.pk, state=JudgeItem.State.RUNNING, claim=item.claim).update(
        state=JudgeItem.State.PENDING, lease_until=None
    )


def _process(
    item: JudgeItem, run: JudgeRun, content_hash: str, steps: list[prompting.StepIn], dispatcher: Dispatcher
) -> str:
    modes = version_modes(version=run.taxonomy_version)
    codes = [m.code for m in modes]
    provider = provider_get(run.provider)
    messages, trunc = _messages(run, modes, steps)
    params_hash = _params_hash(run, messages)
    key = _cache_key(
        content_hash=content_hash,
        prompt_id=run.prompt_id or provider.prompt_identity,
        model=run.model,
        params_hash=params_hash,
    )
    valid_steps = [s.index for s in steps]
    # a run with the cache off asks the model again: its answers are new draws (self-agreement)
    hit = judge_sql.cached_answer(key) if run.use_cache else None
    if hit is not None:
        answer = provider.parse_answer(hit, codes=codes, valid_steps=valid_steps)
        _write_result(
            item,
            run,
            dispatcher,
            modes,
            answer,
            raw=hit,
            trunc=trunc,
            cached=True,
            cache=None,
        )
        return "cached"
    attempts = _Attempts(item, run)
    draws = _Draws()
    try:
        answer = _ask(run, messages, attempts, draws, codes=codes, valid_steps=valid_steps)
    except _Unusable as exc:  # this trace fails (after the bounded retries and one repair); the run goes on
        _item_failed(
            item,
            run,
            dispatcher,
            attempts=attempts.n,
            error=str(exc),
            raw=draws.raw,
            tokens_in=draws.tokens_in,
            tokens_out=draws.tokens_out,
            tokens_reasoning=draws.tokens_reasoning,
            latency_ms=draws.latency_ms,
            trunc=trunc,
        )
        return "failed"
    cache = {
        "key": key,
        "content_hash": content_hash,
        "prompt_id": run.prompt_id,  # None for a provider with its own prompt (its identity is in the key)
        "model": run.model,
        "params_hash": params_hash,
        "raw_answer": draws.raws[-1],
        "parsed": answer.as_dict(),
        "tokens_in": draws.tokens_in,
        "tokens_out": draws.tokens_out,
        "created_at": timezone.now(),
    }
    _write_result(
        item,
        run,
        dispatcher,
        modes,
        answer,
        attempts=attempts.n,
        raw=draws.raw,
        tokens_in=draws.tokens_in,
        tokens_out=draws.tokens_out,
        tokens_reasoning=draws.tokens_reasoning,
        latency_ms=draws.latency_ms,
        trunc=trunc,
        cached=False,
        cache=cache,
    )
    return "done"


def _messages(run: JudgeRun, modes: list, steps: list[prompting.StepIn]) -> tuple[list[dict], prompting.Truncation]:
    """The prompt of one trace for the run's provider (its template, the version's modes, few-shot examples)."""
    few = [prompting.FewShot(f["excerpt"], f["present"], f["codes"]) for f in run.prompt_extras.get("few_shot", [])]
    return provider_get(run.provider).build_messages(
        template=run.prompt.text if run.prompt else "",
        modes=[prompting.ModeIn(m.code, m.name, m.definition, m.examples) for m in modes],
        steps=steps,
        max_chars=int(run.prompt_extras.get("max_chars") or max_chars()),
        few_shot=few,
    )


@dataclass
class _Draws:
    """The model's answers to one trace (the first, and the repair's) and what they cost."""

    raws: list[str] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_reasoning: int = 0
    latency_ms: int = 0

    def add(self, reply: base.Completion) -> None:
        self.raws.append(reply.text)
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        self.tokens_reasoning += reply.tokens_reasoning
        self.latency_ms += reply.latency_ms

    @property
    def raw(self) -> str:
        return "\n\n----- repair answer -----\n\n".join(self.raws)


class _Unusable(Exception):
    """No usable answer for this trace; the message says why."""


def _ask(
    run: JudgeRun,
    messages: list[dict[str, str]],
    attempts: _Attempts,
    draws: _Draws,
    *,
    codes: list[str],
    valid_steps: list[int],
) -> prompting.Answer:
    """The model's parsed answer, with one repair request when the first cannot be used.
    Raises ``_Unusable``; ``draws`` holds every answer received either way."""
    provider = provider_get(run.provider)
    api_key = _api_key(run)
    try:
        draws.add(_call(run, messages, attempts, api_key))
    except base.TransientError as exc:  # still failing after the bounded retries
        raise _Unusable(str(exc)) from exc
    first = draws.raws[0]
    try:
        return provider.parse_answer(first, codes=codes, valid_steps=valid_steps)
    except prompting.AnswerError as exc:
        repair = provider.repair_messages(messages, raw=first, error=str(exc), codes=codes)
        if repair is None:
            raise _Unusable(f"unusable answer: {exc}") from exc
        try:
            draws.add(_call(run, repair, attempts, api_key))
        except base.TransientError as exc2:
            raise _Unusable(f"repair request failed: {exc2}") from exc2
        try:
            return provider.parse_answer(draws.raws[1], codes=codes, valid_steps=valid_steps)
        except prompting.AnswerError as exc2:
            raise _Unusable(f"unusable answer after one repair request: {exc2} (first answer: {exc})") from exc2


def _lock_item(item: JudgeItem) -> bool:
    """Lock the item; False when its result is already written (a duplicate delivery).

    Lock order: the item first, the run row last (its counters are the transaction's final
    statement), so the run row is held only for the commit. Paths that lock the run and then
    items (sweep, resume) take items with SKIP LOCKED, so they never wait on a result being written.
    """
    state = judge_sql.lock_item(item.pk)
    return state not in (None, JudgeItem.State.DONE, JudgeItem.State.FAILED)


def _item_failed(
    item: JudgeItem,
    run: JudgeRun,
    dispatcher: Dispatcher,
    *,
    error: str,
    attempts: int = 0,
    raw: str = "",
    tokens_in: int = 0,
    tokens_out: int = 0,
    tokens_reasoning: int = 0,
    latency_ms: int = 0,
    trunc: prompting.Truncation | None = None,
) -> None:
    cost = _cost(run, tokens_in, tokens_out)
    with transaction.atomic():
        if not _lock_item(item):
            return
        JudgeItem.objects.filter(pk=item.pk).update(
            state=JudgeItem.State.FAILED,
            error=error,
            attempts=F("attempts") + attempts,
            raw_answer=raw,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tokens_reasoning=tokens_reasoning,
            latency_ms=latency_ms,
            cost=cost,
            lease_until=None,
            finished_at=timezone.now(),
            truncated=bool(trunc and trunc.truncated),
            truncation=trunc.as_dict() if trunc else {},
        )
        counters = {
            "n_failed": 1,
            "n_truncated": int(bool(trunc and trunc.truncated)),
            "tokens_reasoning": tokens_reasoning,
        }
        claimed = _hand_on(run, dispatcher, counters, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
    if not claimed:
        finish_if_idle(run, dispatcher)


def _hand_on(
    run: JudgeRun,
    dispatcher: Dispatcher,
    counters: dict[str, int],
    *,
    tokens_in: int,
    tokens_out: int,
    cost: Decimal,
    writes: Sequence[Statement] = (),
) -> bool:
    """The end of a result transaction: the item's own ``writes``, the claim of the next item,
    then this one added to the run's counters, in one round trip (``sql_execute_batch``). The
    counters last: the run's row stays locked only for the commit (see _lock_item).
    Returns whether an item was claimed."""
    claim = claim_next_statement(run, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
    increments = {**counters, "tokens_in": tokens_in, "tokens_out": tokens_out, "cost": cost}
    counted = sql_update_statement(JudgeRun, run.pk, {}, increments=increments)
    if claim is None:
        sql_execute_batch([*writes, counted])
        return False
    rows = sql_execute_batch([*writes, claim, counted], rows_of=len(writes))
    return claim_handed(dispatcher, rows[0] if rows else None)


def _result_rows(
    item: JudgeItem, run: JudgeRun, modes: list[FailureMode], answer: prompting.Answer, usage: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple]]:
    """The annotation's source (who answered, at what cost) and its mode labels from an answer;
    ``usage``: tokens_in, tokens_out, tokens_reasoning, latency_ms, cost, cached, truncated."""
    by_code = {m.code: m for m in modes}
    source = {
        "run": run.pk,
        "item": item.pk,
        "provider": run.provider,
        "model": run.model,
        "prompt": run.prompt.number if run.prompt else None,
        **{k: usage[k] for k in ("tokens_in", "tokens_out", "tokens_reasoning", "latency_ms")},
        "cost": str(usage["cost"]),
        "cached": usage["cached"],
        "truncated": usage["truncated"],
    }
    labels = [
        (
            by_code[m.code].pk,
            "present" if m.present else "absent",
            [{"step": s} for s in m.evidence_steps],
            m.rationale,
            None,
        )
        for m in answer.modes
    ]
    return source, labels


def _write_result(
    item: JudgeItem,
    run: JudgeRun,
    dispatcher: Dispatcher,
    modes: list[FailureMode],
    answer: prompting.Answer,
    *,
    raw: str,
    trunc: prompting.Truncation,
    cached: bool,
    cache: dict | None,
    tokens_in: int = 0,
    tokens_out: int = 0,
    latency_ms: int = 0,
    attempts: int = 0,
    tokens_reasoning: int = 0,
) -> None:
    cost = _cost(run, tokens_in, tokens_out)
    with transaction.atomic():
        if not _lock_item(item):
            return  # a duplicate delivery: the first one wrote the result
        usage = {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_reasoning": tokens_reasoning,
            "latency_ms": latency_ms,
            "cost": cost,
            "cached": cached,
            "truncated": trunc.truncated,
        }
        source, labels = _result_rows(item, run, modes, answer, usage)
        writes: list[Statement] = []  # run in one round trip with the claim (_hand_on)
        ann_id, fresh = machine_annotation_write(
            trace_id=item.trace_id,
            rater_id=run.rater_id,
            version_id=run.taxonomy_version_id,
            task_success=answer.task_success,
            source=source,
            labels=labels,
            defer=writes,
        )
        judge_attribution_write(annotation_id=ann_id, trace_id=item.trace_id, answer=answer.attribution, fresh=fresh)
        values = {
            "state": JudgeItem.State.DONE,
            "raw_answer": raw,
            "parsed": answer.as_dict(),
            **usage,
            "error": "",
            "lease_until": None,
            "truncation": trunc.as_dict(),
            "annotation_id": ann_id,
            "finished_at": timezone.now(),
        }
        writes.append(sql_update_statement(JudgeItem, item.pk, values, increments={"attempts": attempts}))
        if cache is not None:
            writes.append(sql_insert_statement(JudgeCache, [cache], ignore_conflicts=True))
        counters = {
            "n_done": 1,
            "n_cached": int(cached),
            "n_truncated": int(trunc.truncated),
            "tokens_reasoning": tokens_reasoning,
        }
        claimed = _hand_on(
            run, dispatcher, counters, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost, writes=writes
        )
    if not claimed:
        finish_if_idle(run, dispatcher)


def rater_for(*, kind: str, name: str, description: str) -> Rater:
    """The rater a run's labels are filed under, by name (runs.py for LLM runs, baseline.py)."""
    rater, _ = Rater.objects.get_or_create(name=name[:200], defaults={"kind": kind, "description": description})
    if rater.kind != kind:
        raise ValidationError(f"A rater named {name!r} exists with kind {rater.kind}; pick another model name.")
    return rater
