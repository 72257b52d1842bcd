"""The judge's per-trace statements in plain SQL (PostgreSQL).

Every trace of a judge run goes through the same handful of statements, in one Celery worker
process with many threads. With the ORM, compiling them cost the worker more CPU than the
database spent answering them, and the worker's CPU is what bounds a run's throughput
(bench/bench_judge.py). Here they are written once; the generic INSERT/UPDATE and the annotation
upsert live in ``annotations.labels.bulk``, the one writer of non-human labels. The rest of the
judge keeps the ORM.

Rows are locked with ``FOR UPDATE`` (``SKIP LOCKED`` where workers share out items). Values are
passed as parameters, adapted the way the ORM would.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

from django.db import connection

from annotations.judge.prompting import StepIn
from annotations.models import JudgeCache, JudgeItem, JudgeRun, ProviderConnection
from traces.models import Step, Trace
from traces.sqlrows import sql_fetchone as _fetchone
from traces.sqlrows import sql_for_update as _for_update

ITEM, RUN, TRACE, CACHE, CONN, STEP = (
    m._meta.db_table for m in (JudgeItem, JudgeRun, Trace, JudgeCache, ProviderConnection, Step)
)


LOAD_ITEM = (
    "SELECT i.state, i.claim, i.run_id, i.trace_id, t.content_hash,"  # noqa: S608 - table names from the models
    " r.state, r.json_mode, r.tokens_in, r.tokens_out, r.cost, r.dropped_params,"
    " c.key_encrypted, c.key_env, c.base_url"
    f" FROM {ITEM} i JOIN {RUN} r ON r.id = i.run_id JOIN {TRACE} t ON t.id = i.trace_id"
    f" LEFT JOIN {CONN} c ON c.id = r.connection_id"
    " WHERE i.id = %s"
)


STEPS = f'SELECT "index", agent, kind, content FROM {STEP} WHERE trace_id = %s ORDER BY "index"'  # noqa: S608
STEPS_OF_ITEM = (
    f'SELECT "index", agent, kind, content FROM {STEP}'  # noqa: S608 - table names from the models
    f' WHERE trace_id = (SELECT trace_id FROM {ITEM} WHERE id = %s) ORDER BY "index"'
)


# A started item's lease becomes the running lease (dispatch.running_lease_seconds); a stale
# duplicate of a re-claimed item (another claim number) leaves it alone.
START_ITEM = (
    f"UPDATE {ITEM} i SET lease_until = %s + make_interval(secs => LEAST(r.timeout, %s) + %s)"  # noqa: S608
    f" FROM {RUN} r WHERE r.id = i.run_id AND i.id = %s AND i.state = %s AND i.claim = COALESCE(%s, i.claim)"
)


def load_item(
    item_id: int, *, claim: int | None = None, now: datetime | None = None, lease: tuple[float, float] = (0.0, 0.0)
) -> dict | None:
    """The item's state and claim, its trace's content hash and steps, and its run's live fields;
    with ``now``, the item (when it is still running under ``claim``) is leased from then for
    ``min(run timeout, cap) + slack`` seconds, ``lease`` being (cap, slack) (dispatch.running_lease_parts).

    All in one round trip (the statements in one query)."""
    with connection.cursor() as cursor:
        if now is None:
            cursor.execute(f"{LOAD_ITEM}; {STEPS_OF_ITEM}", [item_id, item_id])
        else:
            start = connection.ops.adapt_datetimefield_value(now)
            params = [start, *lease, item_id, JudgeItem.State.RUNNING, claim, item_id, item_id]
            cursor.execute(f"{START_ITEM}; {LOAD_ITEM}; {STEPS_OF_ITEM}", params)
            cursor.cursor.nextset()
        row = cursor.fetchone()
        cursor.cursor.nextset()
        step_rows = cursor.fetchall()
    if row is None:
        return None
    steps = trace_steps(row[3], rows=step_rows)
    state, claim, run_id, trace_id, content_hash, run_state, json_mode, tokens_in, tokens_out, cost = row[:10]
    dropped, key_encrypted, key_env, conn_url = row[10:]
    if isinstance(dropped, str):  # Django has psycopg give JSON as text
        dropped = json.loads(dropped)
    return {
        "steps": steps,
        "dropped_params": list(dropped or []),
        "connection_key": (key_encrypted or "", key_env or "", conn_url),
        "state": state,
        "claim": claim,
        "run_id": run_id,
        "trace_id": trace_id,
        "content_hash": content_hash,
        "run_state": run_state,
        "json_mode": None if json_mode is None else bool(json_mode),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": cost if isinstance(cost, Decimal) else Decimal(str(cost)),
    }


def lease_renew(item_id: int, claim: int, lease_until: datetime) -> bool:
    """Extend a running item's lease (the worker's heartbeat); False when it is no longer ours."""
    lease = connection.ops.adapt_datetimefield_value(lease_until)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {ITEM} SET lease_until = %s WHERE id = %s AND state = %s AND claim = %s",  # noqa: S608
            [lease, item_id, JudgeItem.State.RUNNING, claim],
        )
        return cursor.rowcount == 1


def lock_item(item_id: int) -> str | None:
    """Lock the item's row (in the caller's transaction) and return its state (None: deleted)."""
    row = _fetchone(f"SELECT state FROM {ITEM} WHERE id = %s{_for_update()}", [item_id])  # noqa: S608
    return None if row is None else row[0]


def claim_next_statement(run_id: int, lease_until: datetime) -> tuple[str, list]:
    """The statement claiming the run's first pending item (running, a lease, claim + 1); it returns
    (item id, new claim), or no row.

    Items locked by another transaction are skipped, so concurrent results never wait on each other."""
    sql = (
        f"UPDATE {ITEM} SET state = %s, lease_until = %s, claim = claim + 1"  # noqa: S608 - table names from the models
        f" WHERE id = (SELECT id FROM {ITEM} WHERE run_id = %s AND state = %s ORDER BY id LIMIT 1"
        f"{_for_update(skip_locked=True)}) RETURNING id, claim"
    )
    lease = connection.ops.adapt_datetimefield_value(lease_until)
    return sql, [JudgeItem.State.RUNNING, lease, run_id, JudgeItem.State.PENDING]


def claim_next(run_id: int, lease_until: datetime) -> tuple[int, int] | None:
    """Claim the run's first pending item: (item id, new claim) or None (``claim_next_statement``)."""
    return _fetchone(*claim_next_statement(run_id, lease_until))


def cached_answer(key: str) -> str | None:
    """The raw answer cached under this key, or None."""
    row = _fetchone(f"SELECT raw_answer FROM {CACHE} WHERE key = %s", [key])  # noqa: S608
    return None if row is None else row[0]


def trace_steps(trace_id: int, *, rows: list[tuple] | None = None) -> list[StepIn]:
    """A trace's steps as the prompt shows them (``selectors.trace_steps``, without the ORM);
    ``rows``: its step rows, already read."""
    if rows is None:
        with connection.cursor() as cursor:
            cursor.execute(STEPS, [trace_id])
            rows = cursor.fetchall()
    if not rows:  # a trace without parsed steps: its raw text as one step
        raw = _fetchone(f"SELECT raw_text FROM {TRACE} WHERE id = %s", [trace_id])  # noqa: S608
        if raw is None:
            raise Trace.DoesNotExist(f"trace {trace_id} does not exist")
        return [StepIn(0, "", "log", raw[0])]
    return [StepIn(*r) for r in rows]
