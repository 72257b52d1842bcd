"""The one writer of labels that do not come from the labelling screen.

People's labels go through ``labels.services`` (revisions, history, the 409 protocol). Everything
else is written here:

* ``labels_bulk_write``: many annotations at once, in a few bulk statements: the MAST-Data
  judge's labels that come with imported records, MAST's human-labelled rounds, a rater's labels
  imported into a round. Callers check codes and decisions; rows come in as (trace, rater,
  {code: decision}) and go out as Annotation + ModeLabel rows, nothing else.
* ``machine_annotation_upsert``: one trace's annotation of a non-human rater (LLM judge,
  baseline) outside rounds, replaced by a later run. It runs once per trace of a judge run, so it
  is plain SQL (``sql_insert``/``sql_update``, also used by the judge's other per-trace
  statements): with the ORM, compiling the statements cost the worker more CPU than the database
  spent answering them (bench/bench_judge.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.utils import timezone

from annotations.models import Annotation, ModeLabel, Rater, Round
from taxonomy.models import TaxonomyVersion


@dataclass
class LabelSet:
    """One annotation to write: a rater's decisions on a trace ({code: decision}; None = no label)."""

    trace_id: int
    rater: Rater
    labels: Mapping[str, str | None]
    source: dict = field(default_factory=dict)


def labels_bulk_write(
    *,
    entries: Sequence[LabelSet],
    version: TaxonomyVersion,
    mode_ids: Mapping[str, int],
    round: Round | None = None,
    submitted: bool = True,
    now: datetime | None = None,
) -> tuple[list[Annotation], int]:
    """Create one annotation per entry and its mode labels (codes missing from ``mode_ids`` and
    None decisions are skipped). Returns the annotations and the number of labels written."""
    now = now or timezone.now()
    state = Annotation.State.SUBMITTED if submitted else Annotation.State.DRAFT
    annotations = Annotation.objects.bulk_create(
        [
            Annotation(
                trace_id=e.trace_id,
                rater=e.rater,
                taxonomy_version=version,
                round=round,
                state=state,
                revision=1,
                source=e.source or {},
                submitted_at=now if submitted else None,
            )
            for e in entries
        ],
        batch_size=1000,
    )
    rows = [
        (a.pk, mode_ids[code], decision)
        for a, e in zip(annotations, entries, strict=True)
        for code, decision in e.labels.items()
        if decision is not None and code in mode_ids
    ]
    if connection.vendor == "postgresql":
        # COPY: a MAST-Data file brings ~18k labels, and building that many model instances cost
        # the importer more CPU than the database spent storing them (bench/bench_import.py)
        sql = f"COPY {ModeLabel._meta.db_table} (annotation_id, mode_id, decision, evidence, rationale) FROM STDIN"
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row((*row, "[]", ""))
    else:
        ModeLabel.objects.bulk_create(
            [ModeLabel(annotation_id=a, mode_id=m, decision=d) for a, m, d in rows], batch_size=5000
        )
    return annotations, len(rows)


# ---------------------------------------------------------------- one trace, plain SQL


def sql_for_update(*, skip_locked: bool = False) -> str:
    if not connection.features.has_select_for_update:
        return ""
    if skip_locked and connection.features.has_select_for_update_skip_locked:
        return " FOR UPDATE SKIP LOCKED"
    return " FOR UPDATE"


def sql_fetchone(sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


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
    (``ON CONFLICT ... DO UPDATE``, PostgreSQL and SQLite)."""
    if not rows:
        return []
    quote = connection.ops.quote_name
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
    params = [f.get_db_prep_save(row[f.attname], connection) for row in rows for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [r[0] for r in cursor.fetchall()] if returning_id else []


def sql_update(model, pk: int, values: dict, *, increments: dict | None = None) -> int:
    """UPDATE one row: ``values`` (attname -> value) and ``increments`` (attname -> amount added to
    the column, e.g. a run's counters), each adapted by its field. Returns the rows changed (0 or 1)."""
    fields = [model._meta.get_field(name) for name in values]
    sets = [f"{connection.ops.quote_name(f.column)} = %s" for f in fields]
    params = [f.get_db_prep_save(values[f.attname], connection) for f in fields]
    for name, amount in (increments or {}).items():
        fld = model._meta.get_field(name)
        column = connection.ops.quote_name(fld.column)
        sets.append(f"{column} = {column} + %s")
        params.append(fld.get_db_prep_save(amount, connection))
    sql = f"UPDATE {model._meta.db_table} SET {', '.join(sets)} WHERE id = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, pk])
        return cursor.rowcount


def machine_annotation_upsert(
    *,
    trace_id: int,
    rater_id: int,
    version_id: int,
    task_success: str,
    source: dict,
    labels: list[tuple[int, str, list, str, float | None]],
) -> int:
    """One submitted annotation of a non-human rater per trace (round=None): a later run replaces
    the labels. ``labels`` are (mode id, decision, evidence, rationale, confidence). Returns the
    annotation's id. Call it inside the caller's transaction (the row is locked until it ends)."""
    now = timezone.now()
    found = sql_fetchone(
        f"SELECT id, revision FROM {Annotation._meta.db_table}"  # noqa: S608 - table names from the models
        f" WHERE trace_id = %s AND rater_id = %s AND taxonomy_version_id = %s AND round_id IS NULL{sql_for_update()}",
        [trace_id, rater_id, version_id],
    )
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
        (ann_id,) = sql_insert(Annotation, [row], returning_id=True)
    else:
        ann_id = found[0]
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {ModeLabel._meta.db_table} WHERE annotation_id = %s", [ann_id])  # noqa: S608
        values = {
            "task_success": task_success,
            "source": source,
            "state": state,
            "submitted_at": now,
            "updated_at": now,
        }
        sql_update(Annotation, ann_id, values, increments={"revision": 1})
    sql_insert(
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
