"""Judge runs (writes): create one over a frozen trace selection, start, cancel and resume it.

How a run then moves (claims, the per-trace tasks, crash safety, locks) is told in
``dispatch.py``; the per-trace work is ``worker.py``, a baseline run ``baseline.py``, and driving a
run in this process instead of on Celery ``inline.py``. What a run's provider accepts and calls
is ``providers/``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from annotations.judge import prompting
from annotations.judge.baseline import baseline_run_execute
from annotations.judge.connections import connection_adaptations
from annotations.judge.dispatch import (
    CELERY,
    WHOLE_RUN,
    Dispatcher,
    judge_run_dispatch,
    lease_seconds,
    whole_run_lock,
)
from annotations.judge.prompts import prompt_template_active
from annotations.judge.providers import PROVIDERS, baseline_model, provider_get
from annotations.judge.providers.base import RunConfig
from annotations.judge.providers.mast_official import MAST_CODES
from annotations.judge.selectors import trace_steps
from annotations.judge.worker import allowed_keys, max_chars, rater_for
from annotations.models import Annotation, JudgeItem, JudgeRun, ProviderConnection, Rater, Round, RoundTrace
from annotations.rounds.agreed import agreed_labels, agreed_labels_on_version
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.jobs import job_lock_held, sweep_seconds
from traces.models import Project, Trace

logger = logging.getLogger(__name__)

MAX_CONCURRENCY = 64
FEW_SHOT_N = 3
FEW_SHOT_CHARS = 3000
# The estimate before a run starts: ~4 characters per token; the prompt's definitions and answer
# format add about PROMPT_OVERHEAD_CHARS; a JSON answer over 14 modes is about ANSWER_TOKENS.
CHARS_PER_TOKEN = 4
PROMPT_OVERHEAD_CHARS = 9000
ANSWER_TOKENS = 700


def judge_run_estimate(
    *, trace_ids: list[int], max_chars: int, max_tokens: int, price_in: Decimal, price_out: Decimal
) -> dict[str, Any]:
    """Tokens and cost a run will use, from the traces' sizes (each cut at the run's budget).

    Typical output is ANSWER_TOKENS per trace; reasoning models also spend reasoning tokens
    (billed as output) that no size predicts, so ``cost_high`` counts max_tokens per trace."""
    sizes = Trace.objects.filter(pk__in=trace_ids).values_list("n_chars", flat=True)
    chars = sum(min(int(n or 0), max_chars) + PROMPT_OVERHEAD_CHARS for n in sizes)
    tokens_in = chars // CHARS_PER_TOKEN
    n = len(trace_ids)
    out_typ, out_high = n * min(ANSWER_TOKENS, max_tokens), n * max_tokens
    million = Decimal(1_000_000)

    def cost(tout: int) -> str:
        return f"{(Decimal(tokens_in) * price_in + Decimal(tout) * price_out) / million:.4f}"

    return {
        "traces": n,
        "chars": chars,
        "tokens_in": tokens_in,
        "tokens_out": out_typ,
        "tokens_out_high": out_high,
        "cost": cost(out_typ),
        "cost_high": cost(out_high),
    }


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


def _few_shot(project: Project, version: TaxonomyVersion) -> list[dict]:
    """Examples from the agreed labels carried onto ``version`` through the mappings; a trace where
    the mapping leaves a mode undecided is not shown (its answer would have to guess that mode)."""

    agreed = agreed_labels_on_version(project=project, target=version)
    by_trace: dict[int, list[str]] = {
        t: [c for c, v in values.items() if v == 1] for t, values in agreed.labels.items() if t not in agreed.unknown
    }
    codes = [m.code for m in version_modes(version=version)]
    # Prefer traces with several agreed failures: they teach the most per character.
    chosen = sorted(by_trace, key=lambda t: (-len(by_trace[t]), t))[:FEW_SHOT_N]
    out = []
    for trace_id in chosen:
        text, _ = prompting.render_trace(trace_steps(trace_id), max_chars=FEW_SHOT_CHARS)
        out.append({"trace_id": trace_id, "excerpt": text, "present": by_trace[trace_id], "codes": codes})
    return out


# --------------------------------------------------------------------------- runs


@dataclass
class _Endpoint:
    """Where a run's requests go and what they cost, after the connection and the provider had
    their say."""

    connection: ProviderConnection | None
    base_url: str
    api_key_env: str
    model: str
    price_in: Decimal | float | None
    price_out: Decimal | float | None


def _endpoint_resolve(project: Project, chosen: Any, given: _Endpoint, errors: dict[str, str]) -> _Endpoint:
    """The endpoint a run uses: none for a whole-run provider (the baseline), the connection's URL
    and prices (the given prices override them) when one is chosen; problems go into ``errors``."""
    e = _Endpoint(**vars(given))
    if chosen is not None and not chosen.per_trace:
        # A whole-run provider (the baseline) calls no server: whatever the form's connection and
        # model fields held is not its, and must not name the run (a failed baseline titled "gpt-4o").
        return _Endpoint(None, "", "", baseline_model.NAME, None, None)
    if e.connection is not None:
        if e.connection.project_id != project.pk:
            errors["connection"] = "not a connection of this project"
        if e.api_key_env:
            errors["api_key_env"] = "a run with a connection takes the connection's key; leave this empty"
        e.base_url = e.connection.base_url
        e.price_in = e.connection.price_in if e.price_in in (None, "") else e.price_in
        e.price_out = e.connection.price_out if e.price_out in (None, "") else e.price_out
    return e


def _settings_errors(
    *, chosen: Any, provider: str, e: _Endpoint, version: TaxonomyVersion, baseline_source: str, numbers: dict
) -> dict[str, str]:
    """What is wrong with a run's provider, endpoint and numeric settings (field -> message)."""
    errors: dict[str, str] = {}
    if chosen is None:
        errors["provider"] = f"{provider!r}: expected {' or '.join(PROVIDERS)}"
    else:
        config = RunConfig(
            base_url=e.base_url, model=e.model, api_key_env=e.api_key_env, baseline_source=baseline_source
        )
        errors.update(chosen.validate(config, allowed_keys=allowed_keys()))
        if chosen.name == JudgeRun.Provider.MAST and not set(MAST_CODES) & {
            m.code for m in version_modes(version=version)
        }:
            errors["taxonomy_version"] = f"{version.label} has none of the codes 1.1-3.3 the MAST prompt asks"
    if not 1 <= int(numbers["concurrency"]) <= MAX_CONCURRENCY:
        errors["concurrency"] = f"between 1 and {MAX_CONCURRENCY}"
    if not 0 <= float(numbers["temperature"]) <= 2:
        errors["temperature"] = "between 0 and 2"
    if not 1 <= float(numbers["timeout"]) <= 3600:
        errors["timeout"] = "between 1 and 3600 seconds"
    return errors


def _run_rater_and_estimate(run: JudgeRun, chosen: Any, prompt: Any, version: TaxonomyVersion) -> None:
    """A per-trace run's cost estimate and the rater its answers are stored as."""
    run.estimate = judge_run_estimate(
        trace_ids=run.trace_ids,
        max_chars=run.prompt_extras["max_chars"],
        max_tokens=run.max_tokens,
        price_in=run.price_in,
        price_out=run.price_out,
    )
    what = f"prompt v{prompt.number}" if prompt is not None else chosen.prompt_identity
    run.rater = rater_for(
        kind=chosen.rater_kind,
        name=chosen.rater_name(model=run.model, prompt_number=prompt.number if prompt else None),
        description=f"LLM judge {run.model} with {what} on {version.label}",
    )
    run.save(update_fields=["rater", "estimate"])


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
    price_in: Decimal | float | None = None,
    price_out: Decimal | float | None = None,
    few_shot: bool = False,
    use_cache: bool = True,
    baseline_source: str = "auto",
    connection: ProviderConnection | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
    start: bool = True,
    dispatcher: Dispatcher = CELERY,
) -> JudgeRun:
    """Create a run over a frozen list of traces and queue it (after commit).

    ``connection`` (one of the project's) gives the base URL, the key and the prices (prices
    given here override its) and what its server refused for the model before
    (``ProviderConnection.adaptations``: the run starts without it); ``taxonomy_version`` is any
    published version (default: the project's). The run's estimate (``judge_run_estimate``) is
    stored with it. ``use_cache=False`` sends every trace to the model even where the cache holds
    an answer: a re-run of the same judge is then a second draw, which its self-agreement
    (``reliability.py``) needs."""
    # long-function: 24 lines are the keyword signature (the service's API, one argument per run
    # setting) and 9 its docstring; the body is the checks and one atomic creation, already split.
    # the default is the project's working version (Project.taxonomy_version)
    version = taxonomy_version or project.taxonomy_version
    if version is None:
        raise ValidationError("The project has no taxonomy version; set one before running a judge.")
    errors: dict[str, str] = {}
    if taxonomy_version is not None and not taxonomy_version.is_published:
        errors["taxonomy_version"] = f"{taxonomy_version.label} is a draft; a judge runs on a published version"
    chosen = PROVIDERS.get(provider)
    e = _endpoint_resolve(
        project, chosen, _Endpoint(connection, base_url, api_key_env, model, price_in, price_out), errors
    )
    numbers = {"concurrency": concurrency, "temperature": temperature, "timeout": timeout}
    errors.update(
        _settings_errors(
            chosen=chosen, provider=provider, e=e, version=version, baseline_source=baseline_source, numbers=numbers
        )
    )
    if errors:
        raise ValidationError(errors)
    selection, ids = judge_trace_ids(project=project, traces=traces, taxonomy_version=version)
    if not ids:
        raise ValidationError({"traces": "the selection holds no trace"})
    with transaction.atomic():
        # A per-trace provider is prompted (by the project's prompt, or its own); a whole-run one
        # (the baseline) trains on labels instead.
        own_prompt = chosen.per_trace and chosen.uses_project_prompt
        prompt = prompt_template_active(taxonomy_version=version, by=by) if own_prompt else None
        extras: dict[str, Any] = {"max_chars": max_chars()}
        if own_prompt and few_shot:
            extras["few_shot"] = _few_shot(project, version)
        if not chosen.per_trace:
            selection["baseline_source"] = baseline_source
        known = connection_adaptations(e.connection, e.model) if chosen.per_trace else []
        run = JudgeRun.objects.create(
            project=project,
            provider=provider,
            base_url=e.base_url.strip(),
            model=e.model.strip(),
            api_key_env=e.api_key_env.strip(),
            temperature=float(temperature),
            max_tokens=int(max_tokens),
            timeout=float(timeout),
            prompt=prompt,
            taxonomy_version=version,
            few_shot=bool(few_shot),
            use_cache=bool(use_cache),
            selection=selection,
            trace_ids=ids,
            concurrency=int(concurrency),
            budget_tokens=budget_tokens,
            budget_cost=Decimal(str(budget_cost)) if budget_cost not in (None, "") else None,
            price_in=Decimal(str(e.price_in or 0)),
            price_out=Decimal(str(e.price_out or 0)),
            connection=e.connection,
            # What the connection's server refused for this model before: the run starts in the
            # accepted form (one request per trace), and says so on its page.
            dropped_params=[p for p in known if p != "response_format"],
            json_mode=False if "response_format" in known else None,
            prompt_extras=extras,
            n_total=len(ids),
            created_by=by,
        )
        if chosen.per_trace:
            _run_rater_and_estimate(run, chosen, prompt, version)
        JudgeItem.objects.bulk_create([JudgeItem(run=run, trace_id=t) for t in ids], batch_size=2000)
        if start:
            transaction.on_commit(lambda: dispatcher.start(run.pk))
    return run



def judge_run_start(*, run_id: int, dispatcher: Dispatcher = CELERY) -> None:
    """queued -> running, then fill the concurrency slots (baseline: train and label what is left).

    Safe to call again on a running run (a redelivered start task, a sweep). A whole-run
    provider's task runs under the run's liveness lock (``dispatch.whole_run_lock``): a second
    delivery while it runs exits, and the sweep restarts the run once its worker is gone."""
    provider = JudgeRun.objects.filter(pk=run_id).values_list("provider", flat=True).first()
    if provider is not None and not provider_get(provider).per_trace:
        with whole_run_lock(run_id) as held:
            if held:
                _start(run_id, dispatcher)
        return
    _start(run_id, dispatcher)


def _start(run_id: int, dispatcher: Dispatcher) -> None:
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        if run.state == JudgeRun.State.QUEUED:
            run.state = JudgeRun.State.RUNNING
            run.started_at = run.started_at or timezone.now()
            run.save(update_fields=["state", "started_at", "updated_at"])
        elif run.state != JudgeRun.State.RUNNING:
            return
    if provider_get(run.provider).per_trace:
        judge_run_dispatch(run_id=run_id, dispatcher=dispatcher)
    else:
        baseline_run_execute(run_id=run_id, dispatcher=dispatcher)


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


def judge_run_resume_blocked(*, run: JudgeRun) -> str:
    """Why resuming ``run`` cannot help and what to do instead ("" when a resume may help).

    A baseline that could not be trained (no labels to train on) would train on the same labels
    and fail again."""
    if run.state == JudgeRun.State.FAILED and (run.baseline_info or {}).get("training_failed"):
        return (
            "Resuming would train on the same labels and fail again. Close a round on "
            f"{run.taxonomy_version.label} or on a version mapped onto it (or import a rater's labels on it), "
            "then start a new baseline run."
        )
    return ""


def judge_run_resume(*, run: JudgeRun, by=None, dispatcher: Dispatcher = CELERY) -> JudgeRun:
    """Paused or failed -> running again: pending items (and released ones) are handed out."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if run.state not in (JudgeRun.State.PAUSED, JudgeRun.State.FAILED):
            raise ValidationError(
                f"The run is {run.get_state_display().lower()}; only a paused or failed run can be resumed."
            )
        blocked = judge_run_resume_blocked(run=run)
        if blocked:
            raise ValidationError(blocked)
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
        transaction.on_commit(lambda: dispatcher.start(run.pk))
    return run


def judge_sweep(*, now=None, dispatcher: Dispatcher = CELERY) -> float | None:
    """Re-dispatch every running run (claims expired leases again). Returns seconds until the next
    sweep is useful, or None when no run is running."""
    now = now or timezone.now()
    wait: float | None = None
    for run in JudgeRun.objects.filter(state__in=[JudgeRun.State.RUNNING, JudgeRun.State.QUEUED]):
        if not provider_get(run.provider).per_trace:
            # A running whole-run task holds the run's lock; a free lock means its worker died.
            if run.state == JudgeRun.State.QUEUED or not job_lock_held(kind=WHOLE_RUN, pk=run.pk):
                logger.warning("judge run %s (%s) has no live worker; started again", run.pk, run.provider)
                JudgeRun.objects.filter(pk=run.pk).update(updated_at=now)
                transaction.on_commit(lambda run_id=run.pk: dispatcher.restart(run_id))
            wait = sweep_seconds() if wait is None else min(wait, sweep_seconds())
            continue
        if run.state == JudgeRun.State.QUEUED:
            judge_run_start(run_id=run.pk, dispatcher=dispatcher)
        else:
            judge_run_dispatch(run_id=run.pk, reclaim=True, dispatcher=dispatcher)
        nxt = run.items.filter(state=JudgeItem.State.RUNNING).aggregate(m=Min("lease_until"))["m"]
        until = (nxt - now).total_seconds() + 1 if nxt else lease_seconds(run)
        wait = until if wait is None else min(wait, until)
    return None if wait is None else max(1.0, wait)
