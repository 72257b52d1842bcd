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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from annotations.models import Annotation, ModeLabel, Rater, Round
from taxonomy.models import TaxonomyVersion
from traces.sqlrows import Statement, sql_execute_batch, sql_fetchone, sql_for_update, sql_update


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
    # COPY: a MAST-Data file brings ~18k labels, and building that many model instances cost
    # the importer more CPU than the database spent storing them (bench/bench_import.py)
    sql = f"COPY {ModeLabel._meta.db_table} (annotation_id, mode_id, decision, evidence, rationale) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row((*row, "[]", ""))
    return annotations, len(rows)


# ---------------------------------------------------------------- one trace, plain SQL


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
    ann_id, _ = machine_annotation_write(
        trace_id=trace_id,
        rater_id=rater_id,
        version_id=version_id,
        task_success=task_success,
        source=source,
        labels=labels,
    )
    return ann_id


# The annotation of a non-human rater outside rounds: unique per (trace, rater, version) where
# round_id IS NULL (the partial constraint annotation_unique_outside_round).
_MACHINE_INSERT = (
    f"INSERT INTO {Annotation._meta.db_table}"  # noqa: S608 - table names from the models
    " (trace_id, rater_id, taxonomy_version_id, round_id, state, task_success, notes, revision, source,"
    " created_at, updated_at, submitted_at) VALUES (%s, %s, %s, NULL, %s, %s, '', 1, %s, %s, %s, %s)"
    " ON CONFLICT (trace_id, rater_id, taxonomy_version_id) WHERE round_id IS NULL DO NOTHING RETURNING id"
)
_SOURCE = Annotation._meta.get_field("source")
# PostgreSQL: a trace's mode labels in one statement with ONE parameter (a JSON array of rows).
# As 14 rows x 6 parameters the statement was too long for psycopg's query cache and each of
# the 84 values was adapted one by one: the largest CPU cost of writing a judge result.
_LABELS_FROM_JSON = (
    f"INSERT INTO {ModeLabel._meta.db_table}"  # noqa: S608 - table names from the models
    " (annotation_id, mode_id, decision, evidence, rationale, confidence)"
    " SELECT %s, x.mode_id, x.decision, x.evidence, x.rationale, x.confidence"
    " FROM jsonb_to_recordset(%s::jsonb)"
    " AS x(mode_id integer, decision text, evidence jsonb, rationale text, confidence double precision)"
)


def machine_annotation_write(
    *,
    trace_id: int,
    rater_id: int,
    version_id: int,
    task_success: str,
    source: dict,
    labels: list[tuple[int, str, list, str, float | None]],
    defer: list[Statement] | None = None,
) -> tuple[int, bool]:
    """``machine_annotation_upsert`` that also says whether the annotation is new (True: it had no
    labels, attribution or anything else pointing at it before this transaction).

    The first run over a trace (the common case) is one INSERT for the annotation and one for its
    labels; a trace labelled before by this rater locks its annotation, drops its labels and
    rewrites them (revision + 1). With ``defer``, the INSERT of the labels is appended to it for the
    caller to run with its other statements (``sql_execute_batch``), in the same transaction."""
    now = timezone.now()
    conn = connections[DEFAULT_DB_ALIAS]
    stamp = Annotation._meta.get_field("created_at").get_db_prep_save(now, conn)
    state: str = Annotation.State.SUBMITTED
    with conn.cursor() as cursor:
        cursor.execute(
            _MACHINE_INSERT,
            [trace_id, rater_id, version_id, state, task_success, _SOURCE.get_db_prep_save(source, conn), *[stamp] * 3],
        )
        row = cursor.fetchone()
    created = row is not None
    if created:
        ann_id = row[0]
    else:
        found = sql_fetchone(
            f"SELECT id FROM {Annotation._meta.db_table}"  # noqa: S608 - table names from the models
            " WHERE trace_id = %s AND rater_id = %s AND taxonomy_version_id = %s AND round_id IS NULL"
            f"{sql_for_update()}",
            [trace_id, rater_id, version_id],
        )
        if found is None:  # deleted between the two statements (only possible outside PostgreSQL's locks)
            raise RuntimeError(f"the annotation of trace {trace_id} by rater {rater_id} vanished while it was written")
        ann_id = found[0]
        with conn.cursor() as cursor:
            cursor.execute(f"DELETE FROM {ModeLabel._meta.db_table} WHERE annotation_id = %s", [ann_id])  # noqa: S608
        values = {
            "task_success": task_success,
            "source": source,
            "state": state,
            "submitted_at": now,
            "updated_at": now,
        }
        sql_update(Annotation, ann_id, values, increments={"revision": 1})
    if not labels:
        return ann_id, created
    rows = [{"mode_id": m, "decision": d, "evidence": e, "rationale": r, "confidence": c} for m, d, e, r, c in labels]
    statement: Statement = (_LABELS_FROM_JSON, [ann_id, json.dumps(rows)])
    if defer is not None:
        defer.append(statement)
    else:
        sql_execute_batch([statement])
    return ann_id, created
