"""LLM pre-labelling: prompt versions, judge runs and the per-trace work (writes).

How a run moves (one Celery task per trace, at most ``run.concurrency`` in flight):

1. ``judge_run_create`` freezes the trace selection as items (pending) and queues the start.
2. ``judge_run_dispatch`` (under the run's row lock) counts the running items, claims pending
   ones up to the concurrency limit (state running, a lease, ``claim`` + 1) and enqueues one
   ``annotations.prelabel_trace(item_id, claim)`` task for each after commit. Every finished item
   calls it again, so the run tops itself up; when nothing is pending or running the run is done.
3. ``judge_item_process`` builds the prompt, answers from the cache or calls the server with the
   retry policy (transient faults back off, permanent ones stop the run), parses the answer with
   one repair request, and writes the annotation + the item's result in ONE transaction after
   re-checking the item's state under lock: a task delivered twice writes one result.
4. Crash safety: tasks are acks_late; a claimed item whose lease expired (its worker died) is
   claimed again by ``judge_run_dispatch``; ``judge_sweep`` runs when a worker starts and then
   every lease period while runs are running, so a killed and restarted worker finishes the run.
   A stale duplicate task carries an old ``claim`` number and exits without work.

Locks: a result transaction locks its item first and the run row last (its counters are the
final statement, so the run row is held only for the commit); dispatch, sweep and resume lock the
run row and then take items with SKIP LOCKED, so neither ever waits on the other.

The per-trace statements are plain SQL (``judge_sql``) and the run's unchanging settings are
cached per worker process (``_frozen_run``): the worker's CPU per trace bounds a run's throughput.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Min, Q
from django.utils import timezone

from annotations.judge import baseline as baseline_lib
from annotations.judge import prompting
from annotations.judge import sql as judge_sql
from annotations.judge.providers import keys
from annotations.judge.providers import openai_chat as llm
from annotations.models import (
    Annotation,
    JudgeCache,
    JudgeItem,
    JudgeRun,
    ModeLabel,
    PromptTemplate,
    Rater,
    Round,
    RoundTrace,
)
from taxonomy.models import FailureMode, TaxonomyVersion
from traces.models import Project, Step, Trace

log = logging.getLogger(__name__)

MAX_CONCURRENCY = 64
FEW_SHOT_N = 3
FEW_SHOT_CHARS = 3000
BASELINE_MIN_TRACES = 10
BASELINE_STALE = timedelta(minutes=10)


class JudgeStopped(Exception):
    """The run was cancelled, paused or failed while this item was being worked on."""


# --------------------------------------------------------------------------- settings


def _max_chars() -> int:
    return int(getattr(settings, "MAST_JUDGE_MAX_CHARS", prompting.DEFAULT_MAX_CHARS))


def _policy() -> llm.RetryPolicy:
    return llm.RetryPolicy(
        max_attempts=int(getattr(settings, "MAST_JUDGE_MAX_ATTEMPTS", 5)),
        base=float(getattr(settings, "MAST_JUDGE_BACKOFF_BASE", 0.5)),
        cap=float(getattr(settings, "MAST_JUDGE_BACKOFF_CAP", 30.0)),
    )


def _allowed_keys() -> dict[str, tuple[str, ...]]:
    """MAST_JUDGE_API_KEYS parsed (providers/keys.py); a malformed setting is a configuration error."""
    try:
        return keys.parse_allowed(getattr(settings, keys.SETTING, ""))
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


def lease_seconds(run: JudgeRun) -> float:
    return float(run.timeout) + float(getattr(settings, "MAST_JUDGE_LEASE_SLACK", 15.0))


# Set by callers that process a run in their own process (prelabel --inline, the demo seed): no Celery.
# Process-wide on purpose: the caller's worker threads must see it too.
_INLINE = {"on": 0}


class inline_mode:
    """Context manager: within it, nothing is sent to Celery; the caller drives the claimed items."""

    def __enter__(self):
        _INLINE["on"] += 1

    def __exit__(self, *exc):
        _INLINE["on"] -= 1


def _is_inline() -> bool:
    return _INLINE["on"] > 0


def _enqueue_items(pairs: Sequence[tuple[int, int]]) -> None:
    if _is_inline():
        return
    from annotations.judge.tasks import prelabel_trace

    for item_id, claim in pairs:
        prelabel_trace.delay(item_id, claim)


def _enqueue_baseline(run_id: int) -> None:
    if _is_inline():
        return
    from annotations.judge.tasks import judge_run_start_task

    judge_run_start_task.delay(run_id)


def _enqueue_start(run_id: int) -> None:
    if _is_inline():
        return
    from annotations.judge.tasks import judge_run_start_task, judge_sweep_task

    judge_run_start_task.delay(run_id)
    judge_sweep_task.apply_async(countdown=5)


# --------------------------------------------------------------------------- prompts


def prompt_template_active(*, taxonomy_version: TaxonomyVersion, by=None) -> PromptTemplate:
    """The active prompt of a taxonomy version; version 1 (the default text) is created on first use."""
    current = PromptTemplate.objects.filter(taxonomy_version=taxonomy_version, is_active=True).first()
    if current:
        return current
    with transaction.atomic():
        try:
            with transaction.atomic():
                return PromptTemplate.objects.create(
                    taxonomy_version=taxonomy_version,
                    number=1,
                    text=prompting.DEFAULT_TEMPLATE,
                    notes="Default prompt",
                    created_by=by,
                )
        except IntegrityError:
            return PromptTemplate.objects.get(taxonomy_version=taxonomy_version, is_active=True)


def prompt_template_save(*, taxonomy_version: TaxonomyVersion, text: str, by, notes: str = "") -> PromptTemplate:
    """Save an edited prompt as a new version and make it the active one (old versions stay for old runs)."""
    text = (text or "").replace("\r\n", "\n").strip() + "\n"
    problems = prompting.template_problems(text)
    if problems:
        raise ValidationError({"text": problems})
    with transaction.atomic():
        prompt_template_active(taxonomy_version=taxonomy_version, by=by)
        versions = PromptTemplate.objects.select_for_update().filter(taxonomy_version=taxonomy_version)
        current = [p for p in versions if p.is_active]
        if current and current[0].text == text:
            return current[0]  # nothing changed: no new version
        number = max(p.number for p in versions) + 1
        versions.filter(is_active=True).update(is_active=False)
        return PromptTemplate.objects.create(
            taxonomy_version=taxonomy_version, number=number, text=text, notes=notes[:300], created_by=by
        )


# --------------------------------------------------------------------------- selection


_published_modes: dict[int, list[FailureMode]] = {}


def _modes(version: TaxonomyVersion) -> list[FailureMode]:
    # A published version is frozen (database triggers refuse edits), so its modes are cached per process.
    if version.is_published and version.pk in _published_modes:
        return _published_modes[version.pk]
    modes = list(FailureMode.objects.filter(version=version).order_by("order", "code"))
    if version.is_published:
        _published_modes[version.pk] = modes
    return modes


def judge_trace_ids(
    *, project: Project, traces: str | dict, taxonomy_version: TaxonomyVersion
) -> tuple[dict, list[int]]:
    """Resolve a selection to trace ids: "all", "unlabelled", "round:<id>" or a filter dict.

    "unlabelled" = no submitted human annotation under the taxonomy version and no agreed label.
    A filter dict may hold mas_name, llm_name, benchmark, outcome (exact) and ids (list).
    """
    qs = Trace.objects.filter(project=project)
    if isinstance(traces, dict):
        allowed = {"mas_name", "llm_name", "benchmark", "outcome", "ids"}
        unknown = set(traces) - allowed
        if unknown:
            raise ValidationError({"traces": f"unknown filter key(s) {sorted(unknown)}; allowed: {sorted(allowed)}"})
        for key in ("mas_name", "llm_name", "benchmark", "outcome"):
            if traces.get(key) not in (None, ""):
                qs = qs.filter(**{key: traces[key]})
        if traces.get("ids"):
            try:
                qs = qs.filter(pk__in=[int(i) for i in traces["ids"]])
            except (TypeError, ValueError):
                raise ValidationError({"traces": "ids must be a list of trace ids"})
        selection = {"kind": "filter", "filter": traces}
    else:
        kind = (traces or "all").strip()
        if kind == "all":
            selection = {"kind": "all"}
        elif kind == "unlabelled":
            human = Annotation.objects.filter(
                rater__kind=Rater.Kind.HUMAN, state=Annotation.State.SUBMITTED, taxonomy_version=taxonomy_version
            ).values("trace_id")
            from annotations.rounds.selectors import agreed_labels

            agreed = {a.trace_id for a in agreed_labels(project=project, taxonomy_version=taxonomy_version)}
            qs = qs.exclude(pk__in=human).exclude(pk__in=agreed)
            selection = {"kind": "unlabelled"}
        elif kind.startswith("round:"):
            try:
                round_id = int(kind.split(":", 1)[1])
            except ValueError:
                raise ValidationError({"traces": f"{kind!r}: expected round:<id>"})
            if not Round.objects.filter(project=project, pk=round_id).exists():
                raise ValidationError({"traces": f"round {round_id} is not a round of {project.slug}"})
            qs = qs.filter(pk__in=RoundTrace.objects.filter(round_id=round_id).values("trace_id"))
            selection = {"kind": "round", "round": round_id}
        else:
            raise ValidationError({"traces": f"{kind!r}: expected all, unlabelled, round:<id> or a filter"})
    return selection, list(qs.order_by("id").values_list("id", flat=True))


def _steps(trace_id: int) -> list[prompting.StepIn]:
    rows = Step.objects.filter(trace_id=trace_id).order_by("index").values_list("index", "agent", "kind", "content")
    steps = [prompting.StepIn(*r) for r in rows]
    if not steps:  # a trace without parsed steps: its raw text as one step
        raw = Trace.objects.values_list("raw_text", flat=True).get(pk=trace_id)
        steps = [prompting.StepIn(0, "", "log", raw)]
    return steps


def _few_shot(project: Project, version: TaxonomyVersion) -> list[dict]:
    from annotations.rounds.selectors import agreed_labels

    by_trace: dict[int, list[str]] = {}
    for a in agreed_labels(project=project, taxonomy_version=version):
        by_trace.setdefault(a.trace_id, [])
        if a.decision == "present":
            by_trace[a.trace_id].append(a.mode_code)
    codes = [m.code for m in _modes(version)]
    # Prefer traces with several agreed failures: they teach the most per character.
    chosen = sorted(by_trace, key=lambda t: (-len(by_trace[t]), t))[:FEW_SHOT_N]
    out = []
    for trace_id in chosen:
        text, _ = prompting.render_trace(_steps(trace_id), max_chars=FEW_SHOT_CHARS)
        out.append({"trace_id": trace_id, "excerpt": text, "present": by_trace[trace_id], "codes": codes})
    return out


# --------------------------------------------------------------------------- runs


def _rater_for(*, kind: str, name: str, description: str) -> Rater:
    rater, _ = Rater.objects.get_or_create(name=name[:200], defaults={"kind": kind, "description": description})
    if rater.kind != kind:
        raise ValidationError(f"A rater named {name!r} exists with kind {rater.kind}; pick another model name.")
    return rater


def judge_run_create(
    *,
    project: Project,
    by,
    provider: str,
    base_url: str = "",
    model: str = "",
    api_key_env: str = "",
    temperature: float = 0.0,
    max_tokens: int = 2000,
    timeout: float = 120.0,
    traces: str | dict = "all",
    concurrency: int = 4,
    budget_tokens: int | None = None,
    budget_cost: Decimal | float | None = None,
    price_in: Decimal | float = 0,
    price_out: Decimal | float = 0,
    few_shot: bool = False,
    baseline_source: str = "auto",
    start: bool = True,
) -> JudgeRun:
    """Create a run over a frozen list of traces and queue it (after commit)."""
    errors: dict[str, str] = {}
    version = project.taxonomy_version
    if version is None:
        raise ValidationError("The project has no taxonomy version; set one before running a judge.")
    if provider not in JudgeRun.Provider.values:
        errors["provider"] = f"{provider!r}: expected openai or baseline"
    if provider == "openai":
        if not base_url.startswith(("http://", "https://")):
            errors["base_url"] = "an http(s) URL of an OpenAI-compatible server, e.g. https://api.openai.com/v1"
        if not model.strip():
            errors["model"] = "the model name, e.g. gpt-4o-mini"
        if api_key_env and not api_key_env.replace("_", "").isalnum():
            errors["api_key_env"] = "the NAME of an environment variable (letters, digits, _), not the key"
        elif "base_url" not in errors:
            errors.update(keys.key_problems(name=api_key_env.strip(), base_url=base_url, allowed=_allowed_keys()))
    if not 1 <= int(concurrency) <= MAX_CONCURRENCY:
        errors["concurrency"] = f"between 1 and {MAX_CONCURRENCY}"
    if not 0 <= float(temperature) <= 2:
        errors["temperature"] = "between 0 and 2"
    if not 1 <= float(timeout) <= 3600:
        errors["timeout"] = "between 1 and 3600 seconds"
    if provider == "baseline" and baseline_source != "auto" and not baseline_source.startswith(("agreed", "rater:")):
        errors["baseline_source"] = "auto, agreed or rater:<id>"
    if errors:
        raise ValidationError(errors)
    selection, ids = judge_trace_ids(project=project, traces=traces, taxonomy_version=version)
    if not ids:
        raise ValidationError({"traces": "the selection holds no trace"})
    with transaction.atomic():
        prompt = prompt_template_active(taxonomy_version=version, by=by) if provider == "openai" else None
        extras: dict[str, Any] = {"max_chars": _max_chars()}
        if provider == "openai" and few_shot:
            extras["few_shot"] = _few_shot(project, version)
        if provider == "baseline":
            selection["baseline_source"] = baseline_source
        run = JudgeRun.objects.create(
            project=project,
            provider=provider,
            base_url=base_url.strip(),
            model=model.strip(),
            api_key_env=api_key_env.strip(),
            temperature=float(temperature),
            max_tokens=int(max_tokens),
            timeout=float(timeout),
            prompt=prompt,
            taxonomy_version=version,
            few_shot=bool(few_shot),
            selection=selection,
            trace_ids=ids,
            concurrency=int(concurrency),
            budget_tokens=budget_tokens,
            budget_cost=Decimal(str(budget_cost)) if budget_cost not in (None, "") else None,
            price_in=Decimal(str(price_in or 0)),
            price_out=Decimal(str(price_out or 0)),
            prompt_extras=extras,
            n_total=len(ids),
            created_by=by,
        )
        if provider == "openai":
            run.rater = _rater_for(
                kind=Rater.Kind.LLM,
                name=f"{run.model} · prompt v{prompt.number}",
                description=f"LLM judge {run.model} with prompt v{prompt.number} of {version.label}",
            )
            run.save(update_fields=["rater"])
        JudgeItem.objects.bulk_create([JudgeItem(run=run, trace_id=t) for t in ids], batch_size=2000)
        if start:
            transaction.on_commit(lambda: _enqueue_start(run.pk))
    return run


def judge_run_start(*, run_id: int) -> None:
    """queued -> running, then fill the concurrency slots (baseline: train and label what is left).

    Safe to call again on a running run (a redelivered start task, a sweep)."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        if run.state == JudgeRun.State.QUEUED:
            run.state = JudgeRun.State.RUNNING
            run.started_at = run.started_at or timezone.now()
            run.save(update_fields=["state", "started_at", "updated_at"])
        elif run.state != JudgeRun.State.RUNNING:
            return
    if run.provider == JudgeRun.Provider.BASELINE:
        baseline_run_execute(run_id=run_id)
    else:
        judge_run_dispatch(run_id=run_id)


def judge_run_cancel(*, run: JudgeRun, by=None) -> JudgeRun:
    """Stop handing out items; calls in flight finish their current attempt and release their item."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if run.state not in (JudgeRun.State.QUEUED, JudgeRun.State.RUNNING):
            raise ValidationError(
                f"The run is {run.get_state_display().lower()}; only a queued or running run can be cancelled."
            )
        run.state = JudgeRun.State.PAUSED
        run.error = f"Cancelled by {getattr(by, 'username', 'someone')}."
        run.save(update_fields=["state", "error", "updated_at"])
    return run


def judge_run_resume(*, run: JudgeRun, by=None) -> JudgeRun:
    """Paused or failed -> running again: pending items (and released ones) are handed out."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if run.state not in (JudgeRun.State.PAUSED, JudgeRun.State.FAILED):
            raise ValidationError(
                f"The run is {run.get_state_display().lower()}; only a paused or failed run can be resumed."
            )
        held = list(
            JudgeItem.objects.select_for_update(skip_locked=True)
            .filter(run=run, state=JudgeItem.State.RUNNING)
            .values_list("id", flat=True)
        )
        JudgeItem.objects.filter(pk__in=held).update(state=JudgeItem.State.PENDING, lease_until=None)
        run.state = JudgeRun.State.QUEUED
        run.error = ""
        run.finished_at = None
        run.save(update_fields=["state", "error", "finished_at", "updated_at"])
        transaction.on_commit(lambda: _enqueue_start(run.pk))
    return run


def _budget_reached(run: JudgeRun) -> str:
    if run.budget_tokens and run.tokens_in + run.tokens_out >= run.budget_tokens:
        return f"Paused: the budget of {run.budget_tokens:,} tokens is used up ({run.tokens_in + run.tokens_out:,})."
    if run.budget_cost is not None and run.budget_cost > 0 and run.cost >= run.budget_cost:
        return f"Paused: the budget of {run.budget_cost} is used up ({run.cost:.4f})."
    return ""


def judge_run_dispatch(*, run_id: int, reclaim: bool = False) -> int:
    """Top up the run to its concurrency limit; finish it when nothing is left. Returns items claimed.

    With ``reclaim`` (the sweep), running items whose lease expired are first put back to pending."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.state != JudgeRun.State.RUNNING:
            return 0
        if run.provider == JudgeRun.Provider.BASELINE:
            if not run.items.filter(state__in=[JudgeItem.State.PENDING, JudgeItem.State.RUNNING]).exists():
                _finish(run)
            return 0
        if reclaim:
            # SKIP LOCKED: an item whose result is being written right now is not ours to take back.
            expired = list(
                JudgeItem.objects.select_for_update(skip_locked=True)
                .filter(run=run, state=JudgeItem.State.RUNNING, lease_until__lt=timezone.now())
                .values_list("id", flat=True)
            )
            JudgeItem.objects.filter(pk__in=expired).update(state=JudgeItem.State.PENDING, lease_until=None)
        return _top_up(run)


def _top_up(run: JudgeRun) -> int:
    """Claim pending items up to the limit (caller holds the run's row lock in a transaction)."""
    items = JudgeItem.objects.filter(run=run)
    counts = items.aggregate(
        pending=Count("id", filter=Q(state=JudgeItem.State.PENDING)),
        running=Count("id", filter=Q(state=JudgeItem.State.RUNNING)),
    )
    if counts["pending"] == 0:
        if counts["running"] == 0:
            _finish(run)
        return 0
    reason = _budget_reached(run)
    if reason:
        run.state = JudgeRun.State.PAUSED
        run.error = reason
        run.save(update_fields=["state", "error", "updated_at"])
        return 0
    slots = run.concurrency - counts["running"]
    if slots <= 0:
        return 0
    rows = list(items.filter(state=JudgeItem.State.PENDING).order_by("id").values_list("id", "claim")[:slots])
    lease = timezone.now() + timedelta(seconds=lease_seconds(run))
    items.filter(pk__in=[r[0] for r in rows]).update(
        state=JudgeItem.State.RUNNING, lease_until=lease, claim=F("claim") + 1
    )
    pairs = [(item_id, claim + 1) for item_id, claim in rows]
    transaction.on_commit(lambda: _enqueue_items(pairs))
    return len(pairs)


def _finish(run: JudgeRun) -> None:
    done = run.items.filter(state=JudgeItem.State.DONE).count()
    failed = run.items.filter(state=JudgeItem.State.FAILED).count()
    run.n_done, run.n_failed = done, failed
    if done == 0 and failed:
        run.state = JudgeRun.State.FAILED
        first = run.items.filter(state=JudgeItem.State.FAILED).values_list("error", flat=True).first()
        run.error = f"Every item failed ({failed}); the first said: {first}"[:2000]
    else:
        run.state = JudgeRun.State.DONE
    run.finished_at = timezone.now()
    run.save(update_fields=["state", "error", "n_done", "n_failed", "finished_at", "updated_at"])


def _stop_run(run_id: int, message: str) -> None:
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        if run.state in (JudgeRun.State.RUNNING, JudgeRun.State.QUEUED):
            run.state = JudgeRun.State.FAILED
            run.error = message[:2000]
            run.finished_at = timezone.now()
            run.save(update_fields=["state", "error", "finished_at", "updated_at"])


def judge_sweep(*, now=None) -> float | None:
    """Re-dispatch every running run (claims expired leases again). Returns seconds until the next
    sweep is useful, or None when no run is running."""
    now = now or timezone.now()
    wait: float | None = None
    for run in JudgeRun.objects.filter(state__in=[JudgeRun.State.RUNNING, JudgeRun.State.QUEUED]):
        if run.provider == JudgeRun.Provider.BASELINE:
            # A baseline run is one task that writes a batch at a time; silent for this long = its worker died.
            if run.state == JudgeRun.State.QUEUED or run.updated_at < now - BASELINE_STALE:
                JudgeRun.objects.filter(pk=run.pk).update(updated_at=now)
                transaction.on_commit(lambda run_id=run.pk: _enqueue_baseline(run_id))
            continue
        if run.state == JudgeRun.State.QUEUED:
            judge_run_start(run_id=run.pk)
        else:
            judge_run_dispatch(run_id=run.pk, reclaim=True)
        nxt = run.items.filter(state=JudgeItem.State.RUNNING).aggregate(m=Min("lease_until"))["m"]
        until = (nxt - now).total_seconds() + 1 if nxt else lease_seconds(run)
        wait = until if wait is None else min(wait, until)
    return None if wait is None else max(1.0, wait)


# --------------------------------------------------------------------------- one trace


def _cost(run: JudgeRun, tokens_in: int, tokens_out: int) -> Decimal:
    return (Decimal(tokens_in) * run.price_in + Decimal(tokens_out) * run.price_out) / Decimal(1_000_000)


def _cache_key(*, content_hash: str, prompt_id: int, model: str, params_hash: str) -> str:
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
        lease = timezone.now() + timedelta(seconds=lease_seconds(self.run) + extra)
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


def _call(run: JudgeRun, messages: list[dict[str, str]], attempts: _Attempts, api_key: str) -> llm.Completion:
    def request(json_mode: bool) -> llm.Completion:
        return llm.chat_complete(
            base_url=run.base_url,
            api_key=api_key,
            model=run.model,
            messages=messages,
            temperature=run.temperature,
            max_tokens=run.max_tokens,
            timeout=run.timeout,
            json_mode=json_mode,
        )

    def once() -> llm.Completion:
        json_mode = run.json_mode is not False
        try:
            return request(json_mode)
        except llm.JsonModeUnsupported:
            if not json_mode:
                raise
            # The server does not know response_format: remember it for the run and ask plainly.
            JudgeRun.objects.filter(pk=run.pk).update(json_mode=False)
            run.json_mode = False
            return request(False)

    result = llm.with_retries(once, policy=_policy(), before_attempt=attempts.before, sleep=attempts.sleep)
    if run.json_mode is None:
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
    reused (PostgreSQL sequences, SQLite AUTOINCREMENT), so an entry cannot go stale."""
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


def _load_item(item_id: int) -> tuple[JudgeItem, JudgeRun, str] | None:
    """(item, run, trace content hash) in one query plus the per-process frozen run; None if gone.

    The run is a copy of the frozen one with its live fields (state, JSON mode, spend) from the
    database, so the task may update it in memory without touching other tasks' copies."""
    row = judge_sql.load_item(item_id)
    if row is None:
        return None
    frozen = _frozen_run(row["run_id"])
    if frozen is None:
        return None
    run = copy.copy(frozen)
    run.state, run.json_mode = row["run_state"], row["json_mode"]
    run.tokens_in, run.tokens_out, run.cost = row["tokens_in"], row["tokens_out"], row["cost"]
    item = JudgeItem(pk=item_id, run_id=run.pk, trace_id=row["trace_id"], state=row["state"], claim=row["claim"])
    return item, run, row["content_hash"]


def judge_item_process(*, item_id: int, claim: int | None = None) -> str:
    """Label one trace (idempotent). Returns what happened: done, failed, cached, skipped, stopped."""
    loaded = _load_item(item_id)
    if loaded is None:
        return "skipped"
    item, run, content_hash = loaded
    if item.state != JudgeItem.State.RUNNING or (claim is not None and item.claim != claim):
        return "skipped"  # done already, released, or a stale duplicate of a re-claimed item
    if run.state != JudgeRun.State.RUNNING:
        _release(item)
        return "stopped"
    try:
        outcome = _process(item, run, content_hash)
    except JudgeStopped:
        _release(item)
        return "stopped"
    except llm.PermanentError as exc:
        _release(item)
        _stop_run(run.pk, f"Stopped: {exc} (server {run.base_url}, model {run.model}). Fix it and resume the run.")
        return "stopped"
    except Exception as exc:  # a bug must not leave the item claimed for ever
        log.exception("judge item %s crashed", item_id)
        _item_failed(item, run, error=f"internal error: {type(exc).__name__}: {exc}"[:1000])
        outcome = "failed"
    return outcome


def _release(item: JudgeItem) -> None:
    JudgeItem.objects.filter(pk=item.pk, state=JudgeItem.State.RUNNING, claim=item.claim).update(
        state=JudgeItem.State.PENDING, lease_until=None
    )


def _process(item: JudgeItem, run: JudgeRun, content_hash: str) -> str:
    version = run.taxonomy_version
    modes = _modes(version)
    codes = [m.code for m in modes]
    steps = _steps(item.trace_id)
    few = [prompting.FewShot(f["excerpt"], f["present"], f["codes"]) for f in run.prompt_extras.get("few_shot", [])]
    messages, trunc = prompting.build_messages(
        template=run.prompt.text,
        modes=[prompting.ModeIn(m.code, m.name, m.definition, m.examples) for m in modes],
        steps=steps,
        max_chars=int(run.prompt_extras.get("max_chars") or _max_chars()),
        few_shot=few,
    )
    params_hash = _params_hash(run, messages)
    key = _cache_key(content_hash=content_hash, prompt_id=run.prompt_id, model=run.model, params_hash=params_hash)
    valid_steps = [s.index for s in steps]
    hit = judge_sql.cached_answer(key)
    if hit is not None:
        answer = prompting.parse_answer(hit, codes=codes, valid_steps=valid_steps)
        _write_result(
            item,
            run,
            modes,
            answer,
            raw=hit,
            tokens_in=0,
            tokens_out=0,
            latency_ms=0,
            trunc=trunc,
            cached=True,
            cache=None,
        )
        return "cached"
    api_key = keys.api_key_from_env(run.api_key_env, base_url=run.base_url, allowed=_allowed_keys())
    attempts = _Attempts(item, run)
    try:
        first = _call(run, messages, attempts, api_key)
    except llm.TransientError as exc:  # still failing after the bounded retries: this trace fails, the run goes on
        _item_failed(item, run, attempts=attempts.n, error=str(exc), trunc=trunc)
        return "failed"
    raws, tin, tout, lat = [first.text], first.tokens_in, first.tokens_out, first.latency_ms
    try:
        answer = prompting.parse_answer(first.text, codes=codes, valid_steps=valid_steps)
    except prompting.AnswerError as exc:
        repair = prompting.repair_messages(messages, raw=first.text, error=str(exc), codes=codes)
        try:
            second = _call(run, repair, attempts, api_key)
        except llm.TransientError as exc2:
            _item_failed(
                item,
                run,
                attempts=attempts.n,
                error=f"repair request failed: {exc2}",
                raw=first.text,
                tokens_in=tin,
                tokens_out=tout,
                latency_ms=lat,
                trunc=trunc,
            )
            return "failed"
        raws.append(second.text)
        tin, tout, lat = tin + second.tokens_in, tout + second.tokens_out, lat + second.latency_ms
        try:
            answer = prompting.parse_answer(second.text, codes=codes, valid_steps=valid_steps)
        except prompting.AnswerError as exc2:
            _item_failed(
                item,
                run,
                attempts=attempts.n,
                error=f"unusable answer after one repair request: {exc2} (first answer: {exc})",
                raw="\n\n----- repair answer -----\n\n".join(raws),
                tokens_in=tin,
                tokens_out=tout,
                latency_ms=lat,
                trunc=trunc,
            )
            return "failed"
    cache = {
        "key": key,
        "content_hash": content_hash,
        "prompt_id": run.prompt_id,
        "model": run.model,
        "params_hash": params_hash,
        "raw_answer": raws[-1],
        "parsed": answer.as_dict(),
        "tokens_in": tin,
        "tokens_out": tout,
        "created_at": timezone.now(),
    }
    _write_result(
        item,
        run,
        modes,
        answer,
        attempts=attempts.n,
        raw="\n\n----- repair answer -----\n\n".join(raws),
        tokens_in=tin,
        tokens_out=tout,
        latency_ms=lat,
        trunc=trunc,
        cached=False,
        cache=cache,
    )
    return "done"


def _lock_item(item: JudgeItem) -> bool:
    """Lock the item; False when its result is already written (a duplicate delivery).

    Lock order: the item first, the run row last (its counters are the transaction's final
    statement), so the run row is held only for the commit. Paths that lock the run and then
    items (sweep, resume) take items with SKIP LOCKED, so they never wait on a result being written.
    """
    state = judge_sql.lock_item(item.pk)
    return state not in (None, JudgeItem.State.DONE, JudgeItem.State.FAILED)


def _claim_next(run: JudgeRun, *, tokens_in: int, tokens_out: int, cost: Decimal) -> bool:
    """One trace finished: hand out one more (each completion frees exactly one slot).

    The budget is checked here, on the counters as this item saw them plus its own use: calls
    already in flight can overshoot it by at most concurrency - 1 traces."""
    run.tokens_in += tokens_in
    run.tokens_out += tokens_out
    run.cost += cost
    if run.state != JudgeRun.State.RUNNING or _budget_reached(run):
        return False  # the finish check after commit pauses or finishes the run
    claimed = judge_sql.claim_next(run.pk, timezone.now() + timedelta(seconds=lease_seconds(run)))
    if claimed is None:
        return False
    pairs = [claimed]
    transaction.on_commit(lambda: _enqueue_items(pairs))
    return True


def _finish_if_idle(run: JudgeRun) -> None:
    """After a result: when nothing is running any more, let dispatch finish (or pause) the run."""
    if not JudgeItem.objects.filter(run=run, state=JudgeItem.State.RUNNING).exists():
        judge_run_dispatch(run_id=run.pk)


def _item_failed(
    item: JudgeItem,
    run: JudgeRun,
    *,
    error: str,
    attempts: int = 0,
    raw: str = "",
    tokens_in: int = 0,
    tokens_out: int = 0,
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
            latency_ms=latency_ms,
            cost=cost,
            lease_until=None,
            finished_at=timezone.now(),
            truncated=bool(trunc and trunc.truncated),
            truncation=trunc.as_dict() if trunc else {},
        )
        claimed = _claim_next(run, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
        # The run's counters last: its row stays locked only for the commit (see _lock_item).
        counters = {
            "n_failed": 1,
            "n_truncated": int(bool(trunc and trunc.truncated)),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": cost,
        }
        judge_sql.update(JudgeRun, run.pk, {}, increments=counters)
    if not claimed:
        _finish_if_idle(run)


def _upsert_annotation(
    *,
    trace_id: int,
    rater_id: int,
    version_id: int,
    task_success: str,
    source: dict,
    labels: list[tuple[int, str, list, str, float | None]],
) -> int:
    """One submitted annotation of a non-human rater per trace (round=None): a later run replaces
    the labels. Returns the annotation's id. Plain SQL (judge_sql): it runs once per trace."""
    now = timezone.now()
    found = judge_sql.lock_judge_annotation(trace_id=trace_id, rater_id=rater_id, version_id=version_id)
    state: str = Annotation.State.SUBMITTED
    if found is None:
        row = {
            "trace_id": trace_id,
            "rater_id": rater_id,
            "taxonomy_version_id": version_id,
            "round_id": None,
            "state": state,
            "task_success": task_success,
            "notes": "",
            "revision": 1,
            "source": source,
            "created_at": now,
            "updated_at": now,
            "submitted_at": now,
        }
        (ann_id,) = judge_sql.insert(Annotation, [row], returning_id=True)
    else:
        ann_id = found[0]
        judge_sql.delete_labels(ann_id)
        values = {
            "task_success": task_success,
            "source": source,
            "state": state,
            "submitted_at": now,
            "updated_at": now,
        }
        judge_sql.update(Annotation, ann_id, values, increments={"revision": 1})
    judge_sql.insert(
        ModeLabel,
        [
            {
                "annotation_id": ann_id,
                "mode_id": mode_id,
                "decision": decision,
                "evidence": evidence,
                "rationale": rationale,
                "confidence": confidence,
            }
            for mode_id, decision, evidence, rationale, confidence in labels
        ],
    )
    return ann_id


def _write_result(
    item: JudgeItem,
    run: JudgeRun,
    modes: list[FailureMode],
    answer: prompting.Answer,
    *,
    raw: str,
    tokens_in: int,
    tokens_out: int,
    latency_ms: int,
    trunc: prompting.Truncation,
    cached: bool,
    cache: dict | None,
    attempts: int = 0,
) -> None:
    by_code = {m.code: m for m in modes}
    cost = _cost(run, tokens_in, tokens_out)
    with transaction.atomic():
        if not _lock_item(item):
            return  # a duplicate delivery: the first one wrote the result
        source = {
            "run": run.pk,
            "item": item.pk,
            "provider": run.provider,
            "model": run.model,
            "prompt": run.prompt.number if run.prompt else None,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "latency_ms": latency_ms,
            "cost": str(cost),
            "cached": cached,
            "truncated": trunc.truncated,
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
        ann_id = _upsert_annotation(
            trace_id=item.trace_id,
            rater_id=run.rater_id,
            version_id=run.taxonomy_version_id,
            task_success=answer.task_success,
            source=source,
            labels=labels,
        )
        values = {
            "state": JudgeItem.State.DONE,
            "raw_answer": raw,
            "parsed": answer.as_dict(),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "latency_ms": latency_ms,
            "cost": cost,
            "cached": cached,
            "error": "",
            "lease_until": None,
            "truncated": trunc.truncated,
            "truncation": trunc.as_dict(),
            "annotation_id": ann_id,
            "finished_at": timezone.now(),
        }
        judge_sql.update(JudgeItem, item.pk, values, increments={"attempts": attempts})
        if cache is not None:
            judge_sql.insert(JudgeCache, [cache], ignore_conflicts=True)
        claimed = _claim_next(run, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
        # The run's counters last: its row stays locked only for the commit (see _lock_item).
        counters = {
            "n_done": 1,
            "n_cached": int(cached),
            "n_truncated": int(trunc.truncated),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": cost,
        }
        judge_sql.update(JudgeRun, run.pk, {}, increments=counters)
    if not claimed:
        _finish_if_idle(run)


# --------------------------------------------------------------------------- baseline


def _trace_texts(trace_ids: Sequence[int]) -> dict[int, str]:
    texts: dict[int, list[str]] = {t: [] for t in trace_ids}
    for start in range(0, len(trace_ids), 200):
        chunk = trace_ids[start : start + 200]
        for tid, content in (
            Step.objects.filter(trace_id__in=chunk).order_by("trace_id", "index").values_list("trace_id", "content")
        ):
            texts[tid].append(content)
    out = {t: "\n".join(parts) for t, parts in texts.items()}
    missing = [t for t, text in out.items() if not text]
    for tid, raw in Trace.objects.filter(pk__in=missing).values_list("id", "raw_text"):
        out[tid] = raw
    return out


def baseline_training_data(
    *, project: Project, version: TaxonomyVersion, source: str = "auto"
) -> tuple[str, list[int], np.ndarray, list[str]]:
    """(description, trace ids, traces x modes labels, codes) from agreed labels or a rater's labels."""
    from annotations.rounds.selectors import agreed_labels

    codes = [m.code for m in _modes(version)]
    col = {c: j for j, c in enumerate(codes)}

    def matrix(rows: dict[int, dict[str, int]]) -> tuple[list[int], np.ndarray]:
        ids = sorted(rows)
        y = np.full((len(ids), len(codes)), np.nan)
        for i, t in enumerate(ids):
            for code, v in rows[t].items():
                if code in col:
                    y[i, col[code]] = v
        return ids, y

    if source in ("auto", "agreed"):
        rows: dict[int, dict[str, int]] = {}
        for a in agreed_labels(project=project, taxonomy_version=version):
            rows.setdefault(a.trace_id, {})[a.mode_code] = int(a.decision == "present")
        if len(rows) >= BASELINE_MIN_TRACES or (source == "agreed" and rows):
            ids, y = matrix(rows)
            return f"agreed labels of {project.slug}", ids, y, codes
        if source == "agreed":
            raise ValidationError("The project has no agreed labels (closed rounds) to train the baseline on.")
    if source.startswith("rater:"):
        rater = Rater.objects.filter(pk=int(source.split(":", 1)[1])).first()
        if rater is None:
            raise ValidationError(f"No rater {source}.")
    else:
        # The non-human (imported) rater with the most submitted annotations in the project.
        rater = (
            Rater.objects.filter(
                kind=Rater.Kind.IMPORTED,
                annotations__trace__project=project,
                annotations__state="submitted",
                annotations__taxonomy_version=version,
            )
            .annotate(n=Count("annotations"))
            .order_by("-n", "name")
            .first()
        )
        if rater is None:
            raise ValidationError(
                "Nothing to train the baseline on: no agreed labels (closed rounds) and no imported rater's labels."
            )
    rows = {}
    for tid, code, decision in (
        ModeLabel.objects.filter(
            annotation__rater=rater,
            annotation__trace__project=project,
            annotation__taxonomy_version=version,
            annotation__state="submitted",
        )
        .exclude(decision="unsure")
        .values_list("annotation__trace_id", "mode__code", "decision")
    ):
        rows.setdefault(tid, {})[code] = int(decision == "present")
    ids, y = matrix(rows)
    return rater.name, ids, y, codes


def baseline_run_execute(*, run_id: int, batch: int = 100, progress: Callable[[int], None] | None = None) -> JudgeRun:
    """Train the per-mode classifiers and label every pending item of a baseline run (idempotent)."""
    run = JudgeRun.objects.select_related("project", "taxonomy_version").get(pk=run_id)
    if run.state != JudgeRun.State.RUNNING:
        return run
    version = run.taxonomy_version
    try:
        source, train_ids, y, codes = baseline_training_data(
            project=run.project, version=version, source=run.selection.get("baseline_source", "auto")
        )
        texts = _trace_texts(train_ids)
        model = baseline_lib.train([texts[t] for t in train_ids], y, codes)
    except (ValidationError, ValueError) as exc:
        msg = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        _stop_run(run.pk, f"The baseline could not be trained: {msg}")
        return JudgeRun.objects.get(pk=run.pk)
    name = f"{baseline_lib.NAME} · {source}"
    rater = _rater_for(
        kind=Rater.Kind.BASELINE,
        name=name,
        description=f"Baseline classifier (not an LLM): {model.report()['classifier']}, trained on {source}.",
    )
    info = {**model.report(), "trained_on": source, "training_trace_ids": train_ids[:5000]}
    JudgeRun.objects.filter(pk=run.pk).update(rater=rater, baseline_info=info, model=baseline_lib.NAME)
    run.rater, run.baseline_info = rater, info
    modes = {m.code: m for m in _modes(version)}
    training = set(train_ids)
    while True:
        items = list(
            JudgeItem.objects.filter(run=run, state__in=[JudgeItem.State.PENDING, JudgeItem.State.RUNNING]).order_by(
                "id"
            )[:batch]
        )
        if not items or not JudgeRun.objects.filter(pk=run.pk, state=JudgeRun.State.RUNNING).exists():
            break
        texts = _trace_texts([i.trace_id for i in items])
        started = time.monotonic()
        proba = model.predict_proba([texts[i.trace_id] for i in items])
        latency = int((time.monotonic() - started) * 1000 / max(1, len(items)))
        with transaction.atomic():
            JudgeRun.objects.select_for_update().filter(pk=run.pk).first()
            for item, row in zip(items, proba, strict=True):
                locked = JudgeItem.objects.select_for_update().get(pk=item.pk)
                if locked.state in (JudgeItem.State.DONE, JudgeItem.State.FAILED):
                    continue
                parsed = {
                    "task_success": "unknown",
                    "modes": [
                        {"code": c, "present": bool(p >= 0.5), "probability": round(float(p), 4)}
                        for c, p in zip(codes, row, strict=True)
                    ],
                    "in_training_set": item.trace_id in training,
                }
                labels = [
                    (
                        modes[c].pk,
                        "present" if p >= 0.5 else "absent",
                        [],
                        f"baseline classifier: p(present) = {p:.2f}",
                        round(float(p), 4),
                    )
                    for c, p in zip(codes, row, strict=True)
                ]
                source_json = {
                    "run": run.pk,
                    "item": item.pk,
                    "provider": "baseline",
                    "model": name,
                    "tokens_in": 0,
                    "tokens_out": 0,
                    "latency_ms": latency,
                    "cost": "0",
                    "in_training_set": item.trace_id in training,
                }
                ann_id = _upsert_annotation(
                    trace_id=item.trace_id,
                    rater_id=rater.pk,
                    version_id=version.pk,
                    task_success="unknown",
                    source=source_json,
                    labels=labels,
                )
                JudgeItem.objects.filter(pk=item.pk).update(
                    state=JudgeItem.State.DONE,
                    parsed=parsed,
                    raw_answer=json.dumps(parsed),
                    latency_ms=latency,
                    annotation_id=ann_id,
                    finished_at=timezone.now(),
                    lease_until=None,
                    attempts=F("attempts") + 1,
                )
            JudgeRun.objects.filter(pk=run.pk).update(n_done=run.items.filter(state=JudgeItem.State.DONE).count())
        if progress:
            progress(len(items))
    judge_run_dispatch(run_id=run.pk)  # finishes the run when nothing is left
    return JudgeRun.objects.get(pk=run.pk)


def judge_run_drive_inline(
    *, run_id: int, threads: int | None = None, on_tick: Callable[[JudgeRun], None] | None = None
) -> JudgeRun:
    """Process a run in this process with a thread pool (no Celery worker needed); returns the final run."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def work(item_id: int, claim: int) -> None:
        try:
            judge_item_process(item_id=item_id, claim=claim)
        finally:
            connections.close_all()

    with inline_mode():
        judge_run_start(run_id=run_id)
        run = JudgeRun.objects.get(pk=run_id)
        submitted: set[tuple[int, int]] = set()
        futures = []
        with ThreadPoolExecutor(max_workers=threads or run.concurrency) as pool:
            while True:
                run.refresh_from_db()
                if on_tick:
                    on_tick(run)
                claimed = set(
                    JudgeItem.objects.filter(run_id=run_id, state=JudgeItem.State.RUNNING).values_list("id", "claim")
                )
                new = claimed - submitted
                for pair in new:
                    submitted.add(pair)
                    futures.append(pool.submit(work, *pair))
                futures = [f for f in futures if not f.done()]
                if not futures and not new:
                    # reclaim: an item whose task died here without a result comes back when its
                    # lease ends, instead of keeping this loop waiting for ever.
                    judge_run_dispatch(run_id=run_id, reclaim=True)
                    run.refresh_from_db()
                    if (
                        not run.is_active
                        or not JudgeItem.objects.filter(run_id=run_id, state=JudgeItem.State.RUNNING).exists()
                    ):
                        break
                time.sleep(0.1)
    run.refresh_from_db()
    if on_tick:
        on_tick(run)
    return run
