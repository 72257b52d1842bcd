"""Plain SQL for the hot paths, the project's one shared helper: rows in, statements out.

Rows in: model instances from plain-SQL rows, as the ORM would build them.

Hot read paths (the labelling page, token authentication) read their rows in one hand-written
statement: compiling the ORM's queries cost the web process more CPU than the database spent
answering them. ``model_select`` lists a model's columns for such a statement and
``model_from_row`` turns the values back into an instance with the ORM's own converters (JSON
parsed), so the instance is what ``.get()`` gives.

Statements out (``sql_insert``, ``sql_update``, their ``*_statement`` forms, ``sql_execute_batch``,
``sql_fetchone``): the per-trace writes of judge runs and the labelling page's save, each value
adapted by its model field as the ORM would; with the ORM, compiling the statements cost the
worker more CPU than the database spent answering them (bench/bench_judge.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model


def _fields(model: type[Model], exclude: tuple[str, ...]) -> list:
    return [f for f in model._meta.concrete_fields if f.attname not in exclude]


def model_select(model: type[Model], alias: str, exclude: tuple[str, ...] = ()) -> str:
    """``alias."col", ...`` for the model's concrete fields, less ``exclude`` (attnames: deferred)."""
    return ", ".join(f'{alias}."{f.column}"' for f in _fields(model, exclude))


def model_width(model: type[Model], exclude: tuple[str, ...] = ()) -> int:
    """How many values of a row ``model_select`` selects."""
    return len(_fields(model, exclude))


@cache
def _converters(model: type[Model], exclude: tuple[str, ...]) -> list[tuple[str, object, list]]:
    out = []
    for f in _fields(model, exclude):
        col = f.get_col(model._meta.db_table)
        out.append((f.attname, col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)))
    return out


def model_from_row(model: type[Model], values, exclude: tuple[str, ...] = ()) -> Model:
    """The instance of the values ``model_select(model, ..., exclude)`` selected; ``exclude`` deferred."""
    names, converted = [], []
    for (attname, col, converters), value in zip(_converters(model, exclude), values, strict=True):
        for converter in converters:
            value = converter(value, col, connection)
        names.append(attname)
        converted.append(value)
    return model.from_db(connection.alias, names, converted)


# ---------------------------------------------------------------- statements out


def sql_for_update(*, skip_locked: bool = False) -> str:
    return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


def sql_fetchone(sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


Statement = tuple[str, list]


def sql_insert_statement(
    model,
    rows: list[dict],
    *,
    ignore_conflicts: bool = False,
    returning_id: bool = False,
    upsert: tuple[Sequence[str], Sequence[str]] | None = None,
) -> Statement:
    """The INSERT of ``sql_insert`` as (sql, params), to run with ``sql_execute_batch``."""
    # The thread's connection itself, not the module-level proxy: each field adapting a value asks
    # it for its ops several times, and every proxy access is a thread-local lookup.
    conn = connections[DEFAULT_DB_ALIAS]
    quote = conn.ops.quote_name
    fields = [model._meta.get_field(name) for name in rows[0]]
    columns = ", ".join(quote(f.column) for f in fields)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {', '.join([one] * len(rows))}"  # noqa: S608
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    elif upsert is not None:
        unique, overwrite = ([quote(model._meta.get_field(n).column) for n in names] for names in upsert)
        sets = ", ".join(f"{c} = excluded.{c}" for c in overwrite)
        sql += f" ON CONFLICT ({', '.join(unique)}) DO UPDATE SET {sets}"
    if returning_id:
        sql += " RETURNING id"
    return sql, [f.get_db_prep_save(row[f.attname], conn) for row in rows for f in fields]


def sql_insert(
    model,
    rows: list[dict],
    *,
    ignore_conflicts: bool = False,
    returning_id: bool = False,
    upsert: tuple[Sequence[str], Sequence[str]] | None = None,
) -> list[int]:
    """INSERT rows (dicts of field attname -> value, all with the same keys) in one statement.

    Each value is adapted by its field as the ORM would (JSON, dates, decimals); what the ORM
    adds on top (model instances, signals, auto_now) is the caller's business: these tables have
    none that matter here. Returns the new ids with ``returning_id``. ``upsert=(unique fields,
    fields to overwrite)``: a row that collides on the unique fields updates those fields instead
    (``ON CONFLICT ... DO UPDATE``)."""
    if not rows:
        return []
    sql, params = sql_insert_statement(
        model, rows, ignore_conflicts=ignore_conflicts, returning_id=returning_id, upsert=upsert
    )
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(sql, params)
        return [r[0] for r in cursor.fetchall()] if returning_id else []


def sql_update_statement(model, pk: int, values: dict, *, increments: dict | None = None) -> Statement:
    """The UPDATE of ``sql_update`` as (sql, params), to run with ``sql_execute_batch``."""
    conn = connections[DEFAULT_DB_ALIAS]  # see sql_insert_statement
    fields = [model._meta.get_field(name) for name in values]
    sets = [f"{conn.ops.quote_name(f.column)} = %s" for f in fields]
    params = [f.get_db_prep_save(values[f.attname], conn) for f in fields]
    for name, amount in (increments or {}).items():
        fld = model._meta.get_field(name)
        column = conn.ops.quote_name(fld.column)
        sets.append(f"{column} = {column} + %s")
        params.append(fld.get_db_prep_save(amount, conn))
    sql = f"UPDATE {model._meta.db_table} SET {', '.join(sets)} WHERE id = %s"  # noqa: S608
    return sql, [*params, pk]


def sql_update(model, pk: int, values: dict, *, increments: dict | None = None) -> int:
    """UPDATE one row: ``values`` (attname -> value) and ``increments`` (attname -> amount added to
    the column, e.g. a run's counters), each adapted by its field. Returns the rows changed (0 or 1)."""
    sql, params = sql_update_statement(model, pk, values, increments=increments)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def sql_execute_batch(statements: Sequence[Statement], *, rows_of: int | None = None) -> list[tuple]:
    """Run statements in order, in ONE round trip; the rows of statement ``rows_of``.

    PostgreSQL takes several statements in one query with client-side parameters (psycopg's
    simple query protocol, Django's default cursor); they run in the caller's transaction, and
    the first that fails raises and stops the rest."""
    conn = connections[DEFAULT_DB_ALIAS]
    statements = [s for s in statements if s is not None]
    if not statements:
        return []
    with conn.cursor() as cursor:
        if len(statements) == 1:
            cursor.execute(*statements[0])
            return cursor.fetchall() if rows_of == 0 else []
        cursor.execute("; ".join(sql for sql, _ in statements), [p for _, params in statements for p in params])
        if rows_of is None:
            return []
        for _ in range(rows_of):
            cursor.cursor.nextset()
        return cursor.fetchall()
