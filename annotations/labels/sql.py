"""An autosave's statements in plain SQL (PostgreSQL).

Every few seconds of labelling the screen saves the whole state, so a save is the product's most
frequent write. With the ORM, building and compiling its dozen statements cost the web process
more CPU than PostgreSQL spent answering them (bench/bench_saves.py). Here the hot path is a few
fixed statements in two round trips: read and lock the annotation with everything
its checks need and read its labels and open codes (two statements, one query); then write only
the labels that changed (one upsert, one delete), the row and the history event (one query).
Rules stay in ``annotations.labels.services``; this module only reads and writes rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from annotations.models import (
    Annotation,
    AnnotationEvent,
    Attribution,
    ModeLabel,
    OpenCode,
    Rater,
    Round,
    RoundAnnotator,
    RoundTrace,
)
from taxonomy.models import TaxonomyVersion
from traces.models import Membership, Project, Step, Trace
from traces.sqlrows import (
    model_select,
    model_width,
    sql_execute_batch,
    sql_fetchone,
    sql_for_update,
    sql_insert_statement,
    sql_update_statement,
)

ANN, RATER, ROUND, ATTR, LABEL, CODE = (
    m._meta.db_table for m in (Annotation, Rater, Round, Attribution, ModeLabel, OpenCode)
)
ANN_CODES = Annotation.open_codes.through._meta.db_table
ROUND_TRACE, ROUND_ANNOTATOR = RoundTrace._meta.db_table, RoundAnnotator._meta.db_table


PROJECT, VERSION, MEMBERSHIP, TRACE, STEP = (
    m._meta.db_table for m in (Project, TaxonomyVersion, Membership, Trace, Step)
)


def _json(value: Any) -> Any:
    """A JSON column's value: Django's psycopg gives text (orjson reads it ~3x faster than
    the json module; what it refuses, such as integers beyond 64 bits, goes to the json module)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return json.loads(value)


# What a save's checks read of its target (``_save_target_of`` unpacks these columns), joined to a
# project ``p`` for the user ``{user}`` and the trace given by the next parameter.
_TARGET_COLUMNS = (
    "p.id, p.slug, p.name, p.taxonomy_version_id, v.taxonomy_id, v.number, v.status, m.role, t.id, t.n_lines, t.n_steps"
)
_TARGET_JOINS = (
    f" LEFT JOIN {VERSION} v ON v.id = p.taxonomy_version_id"
    f" LEFT JOIN {MEMBERSHIP} m ON m.project_id = p.id AND m.user_id = {{user}}"
    f" LEFT JOIN {TRACE} t ON t.id = %s AND t.project_id = p.id"
)
SAVE_TARGET = f"SELECT {_TARGET_COLUMNS} FROM {PROJECT} p{_TARGET_JOINS.format(user='%s')} WHERE p.slug = %s"  # noqa: S608


def save_target(
    *, slug: str, user_id: int | None, trace_id: int | None
) -> tuple[Project | None, str | None, Trace | None]:
    """The project (with its taxonomy version), my membership role in it and its trace ``trace_id``
    in one statement; None for what is not there. Only the columns a save reads are loaded; the
    others are deferred (read on first use), as with ``.only()``."""
    row = sql_fetchone(SAVE_TARGET, [user_id, trace_id, slug])
    if row is None:
        return None, None, None
    return _save_target_of(row)


def _save_target_of(row: tuple) -> tuple[Project, str | None, Trace | None]:
    pk, p_slug, name, version_id, taxonomy_id, number, status, role, t_id, n_lines, n_steps = row
    db = connection.alias
    project = Project.from_db(db, ["id", "slug", "name", "taxonomy_version_id"], [pk, p_slug, name, version_id])
    if version_id is not None:
        fields = ["id", "taxonomy_id", "number", "status"]
        project.taxonomy_version = TaxonomyVersion.from_db(db, fields, [version_id, taxonomy_id, number, status])
    trace = None
    if t_id is not None:
        # from_db takes the values in the model's field order (n_steps is declared before n_lines)
        trace = Trace.from_db(db, ["id", "project_id", "n_steps", "n_lines"], [t_id, pk, n_steps, n_lines])
        trace.project = project
    return project, role, trace


def save_target_for_token(
    *, key: str, slug: str, trace_id: int | None
) -> tuple[tuple, tuple, tuple[Project | None, str | None, Trace | None]] | None:
    """API token authentication and ``save_target`` in one statement: (the token's row, its user's
    row, as ``model_select`` lists them for ``model_from_row``; the project, my role and the trace,
    as ``save_target`` gives them), or None for an unknown key."""
    user_model = get_user_model()
    sql = (
        f"SELECT {model_select(Token, 'tk')}, {model_select(user_model, 'u')}, {_TARGET_COLUMNS}"  # noqa: S608 - names from the models
        f" FROM {Token._meta.db_table} tk JOIN {user_model._meta.db_table} u ON u.id = tk.user_id"
        f" LEFT JOIN {PROJECT} p ON p.slug = %s{_TARGET_JOINS.format(user='u.id')}"
        " WHERE tk.key = %s"
    )
    row = sql_fetchone(sql, [slug, trace_id, key])
    if row is None:
        return None
    n_token, n_user = model_width(Token), model_width(user_model)
    target = row[n_token + n_user :]
    return (
        row[:n_token],
        row[n_token : n_token + n_user],
        _save_target_of(target) if target[0] is not None else (None, None, None),
    )


@dataclass
class LockedAnnotation:
    """The row of my annotation, locked until the transaction ends, with what its checks read."""

    annotation: Annotation
    round_name: str | None
    round_state: str | None
    in_round: bool  # the trace is one of the round's traces (always True outside rounds)
    round_annotator: bool  # the user is one of the round's annotators (always True outside rounds)
    attribution: dict | None
    rows: LabelsAndCodes | None = None  # its labels and open codes, when asked for (``with_rows``)


def annotation_lock(
    *,
    trace_id: int,
    user_id: int,
    version_id: int,
    round_id: int | None,
    for_update: bool = True,
    with_rows: bool = False,
) -> LockedAnnotation | None:
    """My annotation of the trace (None when there is none yet), ``SELECT ... FOR UPDATE`` on its row
    (a page view that only reads it passes ``for_update=False``). With ``with_rows``, its labels and
    open codes come too (``LockedAnnotation.rows``, as ``annotation_labels_and_codes`` gives them),
    in the same round trip: two statements in one query, the second finding the
    annotation by the same keys."""
    round_where = "a.round_id = %s" if round_id is not None else "a.round_id IS NULL"
    where = f"a.trace_id = %s AND ra.user_id = %s AND a.taxonomy_version_id = %s AND {round_where}"
    lock = sql_for_update() if for_update else ""
    sql = (
        "SELECT a.id, a.state, a.task_success, a.notes, a.revision, a.submitted_at, a.rater_id,"  # noqa: S608
        " ra.kind, ra.name, rd.name, rd.state,"
        f" EXISTS (SELECT 1 FROM {ROUND_TRACE} rt WHERE rt.round_id = a.round_id AND rt.trace_id = a.trace_id),"
        f" EXISTS (SELECT 1 FROM {ROUND_ANNOTATOR} rn WHERE rn.round_id = a.round_id AND rn.user_id = ra.user_id),"
        " att.id, att.decisive_step, att.no_single_step, att.agent, att.modes, att.reason, att.errors"
        f" FROM {ANN} a JOIN {RATER} ra ON ra.id = a.rater_id"
        f" LEFT JOIN {ROUND} rd ON rd.id = a.round_id"
        f" LEFT JOIN {ATTR} att ON att.annotation_id = a.id"
        f" WHERE {where}" + (f"{lock} OF a" if lock else "")
    )
    params: list = [trace_id, user_id, version_id] + ([round_id] if round_id is not None else [])
    rows = None
    if with_rows:
        mine = f"SELECT a.id FROM {ANN} a JOIN {RATER} ra ON ra.id = a.rater_id WHERE {where}"  # noqa: S608
        with connection.cursor() as cursor:
            cursor.execute(f"{sql}; {_LABELS_AND_CODES.format(ids=mine)}", params * 3)
            row = cursor.fetchone()
            cursor.cursor.nextset()
            rows = _labels_and_codes(cursor.fetchall())
    else:
        row = sql_fetchone(sql, params)
    if row is None:
        return None
    pk, state, task_success, notes, revision, submitted_at, rater_id, kind, name, rd_name, rd_state = row[:11]
    in_round, is_annotator, attr_id, step, no_single, agent, modes, reason, errors = row[11:]
    annotation = Annotation(
        id=pk,
        trace_id=trace_id,
        rater_id=rater_id,
        taxonomy_version_id=version_id,
        round_id=round_id,
        state=state,
        task_success=task_success,
        notes=notes,
        revision=revision,
        submitted_at=submitted_at,
    )
    annotation.rater = Rater(id=rater_id, kind=kind, name=name, user_id=user_id)
    attribution = None
    if attr_id is not None:
        attribution = {
            "step": step,
            "no_single_step": bool(no_single),
            "agent": agent,
            "modes": list(_json(modes)),
            "reason": reason,
            "errors": list(_json(errors)),
        }
    return LockedAnnotation(
        annotation=annotation,
        round_name=rd_name,
        round_state=rd_state,
        in_round=round_id is None or bool(in_round),
        round_annotator=round_id is None or bool(is_annotator),
        attribution=attribution,
        rows=rows,
    )


# An annotation's labels, then its open codes' names (mode id NULL), for the annotations ``{ids}``.
_LABELS_AND_CODES = (
    f"SELECT l.mode_id, l.decision, l.evidence, l.rationale FROM {LABEL} l WHERE l.annotation_id IN ({{ids}})"  # noqa: S608
    f" UNION ALL SELECT NULL, c.name, NULL, NULL FROM {CODE} c JOIN {ANN_CODES} ac ON ac.opencode_id = c.id"
    " WHERE ac.annotation_id IN ({ids})"
)

LabelsAndCodes = tuple[list[tuple[int, str, list, str]], list[str]]


def _labels_and_codes(fetched: list[tuple]) -> LabelsAndCodes:
    labels, codes = [], []
    for mode_id, decision, evidence, rationale in fetched:
        if mode_id is None:
            codes.append(decision)
        else:
            labels.append((mode_id, decision, _json(evidence), rationale))
    return labels, codes


def annotation_labels_and_codes(*, annotation_id: int) -> LabelsAndCodes:
    """The annotation's labels as (mode id, decision, evidence, rationale) and its open codes' names."""
    with connection.cursor() as cursor:
        cursor.execute(_LABELS_AND_CODES.format(ids="%s"), [annotation_id, annotation_id])
        return _labels_and_codes(cursor.fetchall())


def steps_present(*, trace_id: int, indexes: list[int]) -> set[int]:
    """Which of these step indexes the trace has (an index beyond 64 bits has no step)."""
    indexes = [i for i in indexes if -(2**63) <= i < 2**63]
    if not indexes:
        return set()
    marks = ", ".join(["%s"] * len(indexes))
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT s."index" FROM {STEP} s WHERE s.trace_id = %s AND s."index" IN ({marks})',  # noqa: S608
            [trace_id, *indexes],
        )
        return {row[0] for row in cursor.fetchall()}


def annotation_change_write(
    *,
    annotation_id: int,
    gone: list[int],
    put: list[tuple[int, str, list, str]],
    values: dict[str, Any],
    by_id: int | None,
    at: datetime,
    action: str,
    revision: int,
    before: dict,
    after: dict,
    open_codes: tuple[int, list[str]] | None = None,
) -> None:
    """An accepted save's writes in ONE round trip on PostgreSQL (``sql_execute_batch``): delete the
    labels of modes ``gone``, insert or overwrite ``put`` (mode id, decision, evidence, rationale),
    with ``open_codes`` = (project id, names) make the annotation's open codes exactly those names
    (creating the project's missing ones), UPDATE the annotation's row with ``values`` and INSERT
    its history event. Each statement sees the rows of the ones before it (one transaction)."""
    statements: list = []
    if open_codes is not None:
        statements += _open_codes_statements(annotation_id, *open_codes, at=at)
    if gone:
        marks = ", ".join(["%s"] * len(gone))
        statements.append(
            (f"DELETE FROM {LABEL} WHERE annotation_id = %s AND mode_id IN ({marks})", [annotation_id, *gone])  # noqa: S608
        )
    if put:
        rows = [
            {"annotation_id": annotation_id, "mode_id": m, "decision": d, "evidence": e, "rationale": r}
            for m, d, e, r in put
        ]
        overwrite = ("decision", "evidence", "rationale")
        statements.append(sql_insert_statement(ModeLabel, rows, upsert=(("annotation", "mode"), overwrite)))
    statements.append(sql_update_statement(Annotation, annotation_id, values))
    event = {
        "annotation_id": annotation_id,
        "by_id": by_id,
        "at": at,
        "action": action,
        "revision": revision,
        "before": before,
        "after": after,
    }
    statements.append(sql_insert_statement(AnnotationEvent, [event]))
    sql_execute_batch(statements)


def _open_codes_statements(annotation_id: int, project_id: int, names: list[str], *, at: datetime) -> list:
    """The annotation's open codes set to ``names`` (get-or-create by name in the project, then the
    links): what ``OpenCode.objects.bulk_create(ignore_conflicts=True)`` and ``open_codes.set()`` did,
    as three statements. A code created concurrently by another save is found by the later ones."""
    if not names:
        return [(f"DELETE FROM {ANN_CODES} WHERE annotation_id = %s", [annotation_id])]  # noqa: S608
    rows = [{"project_id": project_id, "name": name, "created_at": at, "promoted_how": ""} for name in names]
    marks = ", ".join(["%s"] * len(names))
    mine = f"SELECT c.id FROM {CODE} c WHERE c.project_id = %s AND c.name IN ({marks})"  # noqa: S608
    return [
        sql_insert_statement(OpenCode, rows, ignore_conflicts=True),
        (
            f"DELETE FROM {ANN_CODES} WHERE annotation_id = %s AND opencode_id NOT IN ({mine})",  # noqa: S608
            [annotation_id, project_id, *names],
        ),
        (
            f"INSERT INTO {ANN_CODES} (annotation_id, opencode_id) SELECT %s, c.id FROM {CODE} c"  # noqa: S608
            f" WHERE c.project_id = %s AND c.name IN ({marks}) ON CONFLICT DO NOTHING",
            [annotation_id, project_id, *names],
        ),
    ]
