"""Behaviour search: a judge connection reads the traces a corpus search selected and finds and
quotes a behaviour described in a sentence (``behaviour_prompt.py`` for the request and the
answer), within a token and cost budget.

* **Before it starts**: ``behaviour_estimate`` says what the traces will cost at most (their
  characters as sent, at 3 a token, plus the instructions, plus ``OUTPUT_TOKENS`` out per trace,
  priced at the connection's prices); ``behaviour_search_start`` refuses a budget under the estimate
  and says by how much. Managers start them (a judge's calls cost money).
* **The job** (``behaviour_search_run``, Celery task ``annotations.behaviour_search``): trace by
  trace, only those not read yet (a job killed halfway goes on where it stopped: the sweep sends it
  again when its heartbeat is older than ``STALE_SECONDS``); before each call, the tokens and cost
  spent plus that trace's prediction must fit the budget, else the search stops there and says so.
  The prediction is the trace's estimate scaled by how far the server's counts for the traces read
  so far exceeded their estimates (never below the estimate): one call can still come in above its
  prediction, but none starts that its prediction says would pass the budget.
  Transient errors are retried as the judge's are (``worker.retry_policy``); a parameter the
  server refuses is left out and remembered on the connection; an answer that cannot be read is
  kept as that trace's error, never as a finding.
* **At the end**: the quotes of the traces where the behaviour occurs are clustered
  (``cluster_quotes``) into groups named by their top terms, which a person can rename.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotations.corpus import behaviour_prompt as bp
from annotations.judge.connections import connection_api_key
from annotations.judge.prompting import StepIn
from annotations.judge.providers import base, provider_get
from annotations.judge.worker import connection_adaptation_record, retry_policy
from annotations.models import BehaviourGroup, BehaviourHit, BehaviourSearch, ProviderConnection
from traces.models import Project, Step, Trace
from traces.projects.selectors import user_can

log = logging.getLogger(__name__)

MAX_TRACES = 2_000  # traces one behaviour search reads
MAX_CHARS = 60_000  # characters of one trace sent (longer traces are shortened as the judge's are)
STALE_SECONDS = 120  # a running search whose heartbeat is older is sent again by the sweep
ACTIVE = (BehaviourSearch.State.QUEUED, BehaviourSearch.State.RUNNING)


@dataclass(frozen=True)
class Estimate:
    n_traces: int
    tokens_in: int
    tokens_out: int
    cost: Decimal

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


def _price(connection: ProviderConnection, tokens_in: int, tokens_out: int) -> Decimal:
    return (Decimal(tokens_in) * connection.price_in + Decimal(tokens_out) * connection.price_out) / Decimal(1_000_000)


def behaviour_estimate(*, project: Project, trace_ids: list[int], connection: ProviderConnection) -> Estimate:
    """What reading these traces costs at most (module docstring)."""
    ids = sorted({int(i) for i in trace_ids})
    if not ids:
        raise ValidationError("No traces selected: run a corpus search with hits first.")
    if len(ids) > MAX_TRACES:
        raise ValidationError(
            f"At most {MAX_TRACES:,} traces per behaviour search, got {len(ids):,}: narrow the search."
        )
    sizes = list(Trace.objects.filter(project=project, pk__in=ids).values_list("n_chars", flat=True))
    if len(sizes) != len(ids):
        raise ValidationError("Some of those traces are not in this project.")
    tin = tout = 0
    for n in sizes:
        a, b = bp.estimate_tokens(int(n), max_chars=MAX_CHARS)
        tin, tout = tin + a, tout + b
    return Estimate(len(ids), tin, tout, _price(connection, tin, tout))


def behaviour_search_start(
    *, project: Project, by, description: str, trace_ids: list[int], query: dict, connection: ProviderConnection,
    model: str, max_tokens: int, max_cost: Decimal | None = None, enqueue: bool = True,
) -> BehaviourSearch:  # fmt: skip
    """A queued search (its job enqueued on commit unless ``enqueue`` is false: the demo runs it in
    its own process), or ``ValidationError`` saying why not."""
    if not user_can(user=by, project=project, capability="manage"):
        raise PermissionDenied(f"Only managers of {project.name} start behaviour searches (their calls cost money).")
    description = " ".join(str(description or "").split())
    if len(description) < 8:
        raise ValidationError({"description": "Describe the behaviour in a sentence."})
    if len(description) > 1000:
        raise ValidationError({"description": "At most 1,000 characters."})
    if connection.project_id != project.pk:
        raise ValidationError({"connection": "Not a connection of this project."})
    model = (model or "").strip()
    if not model:
        raise ValidationError({"model": "Name the model to ask."})
    est = behaviour_estimate(project=project, trace_ids=trace_ids, connection=connection)
    if max_tokens < est.tokens:
        raise ValidationError({"max_tokens": (
            f"The estimate is {est.tokens:,} tokens for {est.n_traces} traces, over the budget of {max_tokens:,}: "
            "raise the budget or narrow the search.")})  # fmt: skip
    if max_cost is not None and est.cost > max_cost:
        raise ValidationError({"max_cost": (
            f"The estimate is {est.cost:.4f} at the connection's prices, over the budget of {max_cost:.4f}: "
            "raise the budget or narrow the search.")})  # fmt: skip
    search = BehaviourSearch.objects.create(
        project=project, description=description, query=query, trace_ids=sorted({int(i) for i in trace_ids}),
        connection=connection, model=model, max_tokens=max_tokens, max_cost=max_cost,
        estimate_tokens=est.tokens, estimate_cost=est.cost, created_by=by,
    )  # fmt: skip
    if enqueue:
        transaction.on_commit(lambda: _enqueue(search.pk))
    return search


def _enqueue(search_id: int) -> None:
    from annotations.corpus.tasks import behaviour_search_task

    behaviour_search_task.delay(search_id)


def behaviour_search_cancel(*, search: BehaviourSearch, by) -> BehaviourSearch:
    if not user_can(user=by, project=search.project, capability="manage"):
        raise PermissionDenied("Only managers cancel behaviour searches.")
    BehaviourSearch.objects.filter(pk=search.pk, state__in=ACTIVE).update(
        state=BehaviourSearch.State.CANCELLED, finished_at=timezone.now(), error="cancelled by " + by.get_username()
    )
    search.refresh_from_db()
    return search


def _steps(trace_id: int) -> list[StepIn]:
    rows = Step.objects.filter(trace_id=trace_id).order_by("index").values_list("index", "agent", "kind", "content")
    return [StepIn(i, a, k, c) for i, a, k, c in rows]


def _claim(search_id: int) -> BehaviourSearch | None:
    """The search, marked running with a fresh heartbeat, or None when it is finished or another
    worker's heartbeat is fresh."""
    now = timezone.now()
    stale = now - timedelta(seconds=STALE_SECONDS)
    with transaction.atomic():
        s = BehaviourSearch.objects.select_for_update().filter(pk=search_id).first()
        if s is None or s.state not in ACTIVE:
            return None
        if s.state == BehaviourSearch.State.RUNNING and s.heartbeat_at and s.heartbeat_at > stale:
            return None
        s.state, s.heartbeat_at = BehaviourSearch.State.RUNNING, now
        s.save(update_fields=["state", "heartbeat_at"])
        return s


def _finish(s: BehaviourSearch, state: str, error: str = "") -> None:
    BehaviourSearch.objects.filter(pk=s.pk, state=BehaviourSearch.State.RUNNING).update(
        state=state, error=error[:2000], finished_at=timezone.now()
    )


def _one(s: BehaviourSearch, provider, call: base.Call, trace_id: int) -> BehaviourHit:
    steps = _steps(trace_id)
    messages = bp.behaviour_messages(behaviour=s.description, steps=steps, max_chars=MAX_CHARS)

    def learned(param: str) -> None:
        connection_adaptation_record(connection_id=s.connection_id, model=s.model, param=param)

    def ask() -> base.Completion:
        return base.complete_adapting(provider, call, messages, json_mode=True, on_drop=learned)

    hit = BehaviourHit(search=s, trace_id=trace_id)
    try:
        done = base.with_retries(ask, policy=retry_policy())
    except base.LLMError as exc:
        hit.error = f"the call failed: {exc}"[:2000]
        return hit
    hit.tokens_in, hit.tokens_out = done.tokens_in, done.tokens_out
    try:
        finding = bp.finding_parse(done.text, steps={st.index: st.content for st in steps})
    except bp.AnswerError as exc:
        hit.error = f"unusable answer: {exc}"
        return hit
    hit.present, hit.score, hit.explanation = finding.present, bp.rank_score(finding), finding.explanation
    hit.quotes = [{"step": q.step, "quote": q.quote, "found": q.found} for q in finding.quotes]
    return hit


def behaviour_search_run(*, search_id: int) -> str:
    """Read the traces not read yet, within the budget; then cluster. Idempotent (module docstring)."""
    s = _claim(search_id)
    if s is None:
        return "nothing to do"
    conn = s.connection
    if conn is None:
        _finish(s, BehaviourSearch.State.FAILED, "its connection was deleted")
        return "failed"
    try:
        api_key = connection_api_key(conn)
    except Exception as exc:  # a key that cannot be read: say so, never the key
        _finish(s, BehaviourSearch.State.FAILED, f"the connection's key cannot be used: {type(exc).__name__}")
        return "failed"
    known = (conn.adaptations or {}).get(s.model, [])
    call = base.Call(base_url=conn.base_url, api_key=api_key, model=s.model, temperature=0.0,
                     max_tokens=bp.OUTPUT_TOKENS, timeout=120.0, dropped=frozenset(known))  # fmt: skip
    provider = provider_get("openai")
    done_ids = set(BehaviourHit.objects.filter(search=s).values_list("trace_id", flat=True))
    sizes = dict(Trace.objects.filter(pk__in=s.trace_ids).values_list("pk", "n_chars"))
    estimated_in = sum(bp.estimate_tokens(int(sizes[t]), max_chars=MAX_CHARS)[0] for t in done_ids if t in sizes)
    for trace_id in s.trace_ids:
        if trace_id in done_ids or trace_id not in sizes:
            continue
        s.refresh_from_db(fields=["state", "tokens_in", "tokens_out", "cost"])
        if s.state != BehaviourSearch.State.RUNNING:
            return s.state  # cancelled meanwhile
        tin, tout = bp.estimate_tokens(int(sizes[trace_id]), max_chars=MAX_CHARS)
        # the server's counts so far against the estimates of the same traces scale the next one's
        ratio = max(1.0, s.tokens_in / estimated_in) if estimated_in and s.tokens_in else 1.0
        tin = int(tin * ratio)
        if s.tokens_in + s.tokens_out + tin + tout > s.max_tokens or (
            s.max_cost is not None and s.cost + _price(conn, tin, tout) > s.max_cost
        ):
            _finish(s, BehaviourSearch.State.STOPPED,
                    f"stopped before trace {trace_id}: its estimate would pass the budget "
                    f"({s.tokens_in + s.tokens_out:,} of {s.max_tokens:,} tokens spent)")  # fmt: skip
            break
        hit = _one(s, provider, call, trace_id)
        estimated_in += bp.estimate_tokens(int(sizes[trace_id]), max_chars=MAX_CHARS)[0]
        cost = _price(conn, hit.tokens_in, hit.tokens_out)
        with transaction.atomic():
            hit.save()
            BehaviourSearch.objects.filter(pk=s.pk).update(
                n_done=F("n_done") + 1, tokens_in=F("tokens_in") + hit.tokens_in,
                tokens_out=F("tokens_out") + hit.tokens_out, cost=F("cost") + cost, heartbeat_at=timezone.now(),
            )  # fmt: skip
    behaviour_groups_build(search=s)
    _finish(s, BehaviourSearch.State.DONE)
    s.refresh_from_db(fields=["state"])
    return s.state


@transaction.atomic
def behaviour_groups_build(*, search: BehaviourSearch) -> int:
    """Cluster the quotes of the hits where the behaviour occurs (names kept where a person gave one
    to a group of the same number). Returns the number of groups."""
    hits = list(BehaviourHit.objects.filter(search=search, present=True).order_by("pk"))
    named = {g.number: g.name for g in search.groups.all() if g.name and not g.name.startswith("Group ")}
    search.groups.all().delete()
    if not hits:
        return 0
    texts = [" ".join(q["quote"] for q in h.quotes) or h.explanation for h in hits]
    clusters = bp.cluster_quotes(texts)
    groups = {}
    for number, terms in enumerate(clusters.terms):
        default = f"Group {number + 1}: " + (", ".join(terms) if terms else "no distinctive words")
        groups[number] = BehaviourGroup.objects.create(
            search=search, number=number + 1, name=named.get(number + 1, default)[:120], terms=terms
        )
    for h, label in zip(hits, clusters.labels, strict=True):
        h.group = groups[label]
    BehaviourHit.objects.bulk_update(hits, ["group"])
    return len(groups)


def behaviour_group_rename(*, group: BehaviourGroup, name: str, by) -> BehaviourGroup:
    if not user_can(user=by, project=group.search.project, capability="manage"):
        raise PermissionDenied("Only managers name groups.")
    name = " ".join(str(name or "").split())
    if not name or len(name) > 120:
        raise ValidationError("A group's name has 1 to 120 characters.")
    group.name = name
    group.save(update_fields=["name"])
    return group


def behaviour_sweep(*, now=None) -> int:
    """Send again the searches whose job was lost (queued or running with an old heartbeat)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=STALE_SECONDS)
    queued_before = now - timedelta(seconds=30)
    ids = list(
        BehaviourSearch.objects.filter(state__in=ACTIVE, created_at__lt=queued_before)
        .exclude(state=BehaviourSearch.State.RUNNING, heartbeat_at__gt=stale)
        .values_list("pk", flat=True)
    )
    for pk in ids:
        _enqueue(pk)
    return len(ids)


__all__ = [
    "Estimate",
    "behaviour_estimate",
    "behaviour_group_rename",
    "behaviour_groups_build",
    "behaviour_search_cancel",
    "behaviour_search_run",
    "behaviour_search_start",
    "behaviour_sweep",
]
