"""The judge's per-trace statements in plain SQL (PostgreSQL and SQLite).

Every trace of a judge run goes through the same handful of statements, in one Celery worker
process with many threads. With the ORM, compiling them cost the worker more CPU than the
database spent answering them, and the worker's CPU is what bounds a run's throughput
(bench/bench_judge.py). Here they are written once; the rest of the judge keeps the ORM.

Row locks (``FOR UPDATE``, ``SKIP LOCKED``) are added where the database has them; SQLite has a
single writer, so it needs none. Values are passed as parameters, adapted the way the ORM would.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import connection

from annotations.models import Annotation, JudgeCache, JudgeItem, JudgeRun, ModeLabel
from traces.models import Trace

ITEM, RUN, TRACE, CACHE = (m._meta.db_table for m in (JudgeItem, JudgeRun, Trace, JudgeCache))


def _for_update(*, skip_locked: bool = False) -> str:
    if not connection.features.has_select_for_update:
        return ""
    if skip_locked and connection.features.has_select_for_update_skip_locked:
        return " FOR UPDATE SKIP LOCKED"
    return " FOR UPDATE"


def _fetchone(sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


LOAD_ITEM = (
    "SELECT i.state, i.claim, i.run_id, i.trace_id, t.content_hash,"  # noqa: S608 - table names from the models
    " r.state, r.json_mode, r.tokens_in, r.tokens_out, r.cost"
    f" FROM {ITEM} i JOIN {RUN} r ON r.id = i.run_id JOIN {TRACE} t ON t.id = i.trace_id"
    " WHERE i.id = %s"
)


def load_item(item_id: int) -> dict | None:
    """The item's state and claim, its trace's content hash and its run's live fields."""
    row = _fetchone(LOAD_ITEM, [item_id])
    if row is None:
        return None
    state, claim, run_id, trace_id, content_hash, run_state, json_mode, tokens_in, tokens_out, cost = row
    return {
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


def lock_item(item_id: int) -> str | None:
    """Lock the item's row (in the caller's transaction) and return its state (None: deleted)."""
    row = _fetchone(f"SELECT state FROM {ITEM} WHERE id = %s{_for_update()}", [item_id])  # noqa: S608
    return None if row is None else row[0]


def claim_next(run_id: int, lease_until: datetime) -> tuple[int, int] | None:
    """Claim the run's first pending item (running, a lease, claim + 1): (item id, new claim) or None.

    Items locked by another transaction are skipped, so concurrent results never wait on each other."""
    sql = (
        f"UPDATE {ITEM} SET state = %s, lease_until = %s, claim = claim + 1"  # noqa: S608 - table names from the models
        f" WHERE id = (SELECT id FROM {ITEM} WHERE run_id = %s AND state = %s ORDER BY id LIMIT 1"
        f"{_for_update(skip_locked=True)}) RETURNING id, claim"
    )
    lease = connection.ops.adapt_datetimefield_value(lease_until)
    return _fetchone(sql, [JudgeItem.State.RUNNING, lease, run_id, JudgeItem.State.PENDING])


def cached_answer(key: str) -> str | None:
    """The raw answer cached under this key, or None."""
    row = _fetchone(f"SELECT raw_answer FROM {CACHE} WHERE key = %s", [key])  # noqa: S608
    return None if row is None else row[0]


def insert(model, rows: list[dict], *, ignore_conflicts: bool = False, returning_id: bool = False) -> list[int]:
    """INSERT rows (dicts of field attname -> value, all with the same keys) in one statement.

    Each value is adapted by its field as the ORM would (JSON, dates, decimals); what the ORM
    adds on top (model instances, signals, auto_now) is the caller's business: these tables have
    none that matter here. Returns the new ids with ``returning_id``."""
    if not rows:
        return []
    fields = [model._meta.get_field(name) for name in rows[0]]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {', '.join([one] * len(rows))}"  # noqa: S608
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    if returning_id:
        sql += " RETURNING id"
    params = [f.get_db_prep_save(row[f.attname], connection) for row in rows for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [r[0] for r in cursor.fetchall()] if returning_id else []


def update(model, pk: int, values: dict, *, increments: dict | None = None) -> int:
    """UPDATE one row: ``values`` (attname -> value) and ``increments`` (attname -> amount added to
    the column, e.g. a run's counters), each adapted by its field. Returns the rows changed (0 or 1)."""
    fields = [model._meta.get_field(name) for name in values]
    sets = [f"{connection.ops.quote_name(f.column)} = %s" for f in fields]
    params = [f.get_db_prep_save(values[f.attname], connection) for f in fields]
    for name, amount in (increments or {}).items():
        field = model._meta.get_field(name)
        column = connection.ops.quote_name(field.column)
        sets.append(f"{column} = {column} + %s")
        params.append(field.get_db_prep_save(amount, connection))
    sql = f"UPDATE {model._meta.db_table} SET {', '.join(sets)} WHERE id = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, pk])
        return cursor.rowcount


def lock_judge_annotation(*, trace_id: int, rater_id: int, version_id: int) -> tuple[int, int] | None:
    """(id, revision) of the rater's annotation of the trace outside rounds, locked; None if none."""
    sql = (
        f"SELECT id, revision FROM {Annotation._meta.db_table}"  # noqa: S608 - table names from the models
        f" WHERE trace_id = %s AND rater_id = %s AND taxonomy_version_id = %s AND round_id IS NULL{_for_update()}"
    )
    return _fetchone(sql, [trace_id, rater_id, version_id])


def delete_labels(annotation_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {ModeLabel._meta.db_table} WHERE annotation_id = %s", [annotation_id])  # noqa: S608
