"""Writing an import's new traces and their steps, in batches, inside the import's transaction.

Trace ids are reserved from the sequence and the Trace and Step rows go in with ``COPY`` in
batches (a few MB each), so the 200 MB MAST-Data file never sits in memory. The COPY data is
sent by psycopg's queued writer thread, so the server works while the next rows are parsed.
After each batch is written, every hook's ``on_trace`` is called for its traces (see
``traces.importing.hooks``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone
from psycopg.copy import QueuedLibpqWriter
from psycopg.types.json import Json, Jsonb, JsonbBinaryDumper, set_json_dumps

from traces.importing.hooks import ImportBatch
from traces.models import ImportJob, Project, Step, Trace
from traces.parsers import ParsedStep, ParsedTrace

_BATCH_BYTES = 8 * 1024**2  # flush buffered rows to the database every ~8 MB of trace text
_BATCH_TRACES = 500

_TRACE_COLUMNS = (
    "id",
    "project_id",
    "mas_name",
    "llm_name",
    "benchmark",
    "task",
    "external_id",
    "title",
    "format",
    "raw_text",
    "size_bytes",
    "content_hash",
    "metadata",
    "outcome",
    "n_steps",
    "n_agents",
    "n_agent_switches",
    "n_chars",
    "n_lines",
    "n_repeated_steps",
    "agents",
    "import_job_id",
    "imported_at",
)
_STEP_COLUMNS = ("trace_id", "index", "agent", "kind", "content", "line_start", "line_end", "details")
# written only when a step of the batch has them (span formats): flat traces' COPY stays as it was
_TREE_COLUMNS = ("parent_index", "model", "input_tokens", "output_tokens", "started_at", "duration_ms")


@dataclass
class _Pending:
    parsed: ParsedTrace
    row: dict[str, Any]
    extra: dict[str, Any]


class TraceWriter:
    """Buffers new traces and flushes them in batches (COPY).

    A batch is written by one background thread on the import's own connection
    (same session, same transaction) while the caller parses the next batch: the server stores
    one batch while Python reads the next, instead of each waiting for the other. Hooks see a
    batch's traces once its write has finished, on the caller's thread. ``finish()`` writes the
    rest and waits; ``close()`` (always, in a ``finally``) waits for a write still in flight, so
    the transaction is never ended under it."""

    def __init__(self, batch: ImportBatch, hooks: tuple[Any, ...]) -> None:
        self.batch = batch
        self.hooks = hooks
        self.pending: list[_Pending] = []
        self.pending_bytes = 0
        self.trace_ids: list[int] = []
        self.checks_immediate = False
        self.now = timezone.now()
        self._executor: ThreadPoolExecutor | None = None
        self._inflight: tuple[Future, list[_Pending]] | None = None

    def add(self, parsed: ParsedTrace, row: dict[str, Any], extra: dict[str, Any]) -> None:
        for st in parsed.steps:
            if st.details:  # most steps have none: no call for them
                _promote_details(st)
        self.pending.append(_Pending(parsed, row, extra))
        self.pending_bytes += row["size_bytes"]
        if self.pending_bytes >= _BATCH_BYTES or len(self.pending) >= _BATCH_TRACES:
            self.flush()

    def flush(self) -> None:
        """Start writing the buffered traces (in the background)."""
        if not self.pending:
            return
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        if self._executor is None:
            connection.ensure_connection()
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-copy")
        future = self._executor.submit(self._write_postgres, connection.connection, pending)
        self._collect()  # the batch before: its write ran first (one thread), then its hooks
        self._inflight = (future, pending)

    def finish(self) -> None:
        """Write everything still buffered and wait for it; raises what a write raised."""
        self.flush()
        self._collect()

    def close(self) -> None:
        if self._inflight is not None:
            future, self._inflight = self._inflight[0], None
            wait([future])
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _collect(self) -> None:
        if self._inflight is not None:
            (future, pending), self._inflight = self._inflight, None
            self._written(pending, future.result())

    def _written(self, pending: list[_Pending], ids: list[int]) -> None:
        self.trace_ids.extend(ids)
        for p, trace_id in zip(pending, ids, strict=True):
            for hook in self.hooks:
                hook.on_trace(batch=self.batch, trace_id=trace_id, parsed=p.parsed, extra=p.extra)

    def _write_postgres(self, raw: Any, pending: list[_Pending]) -> list[int]:
        # ``raw`` is the psycopg connection under Django's (a thread of its own would get another
        # connection from Django, outside the import's transaction); psycopg serialises its use.
        with raw.cursor() as pg:
            pg.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [Trace._meta.db_table, len(pending)],
            )
            ids = [r[0] for r in pg.fetchall()]
            set_json_dumps(_dumps, context=pg)
            pg.adapters.register_dumper(dict, _JsonbCopyDumper)  # what COPY's jsonb columns use
            if not self.checks_immediate:
                _step_checks_immediate(pg)
                self.checks_immediate = True
            with _copy(pg, Trace._meta.db_table, _TRACE_COLUMNS) as copy:
                for trace_id, p in zip(ids, pending, strict=True):
                    row = p.row
                    copy.write_row(
                        (
                            trace_id,
                            row["project_id"],
                            row["mas_name"],
                            row["llm_name"],
                            row["benchmark"],
                            row["task"],
                            row["external_id"],
                            row["title"],
                            row["format"],
                            row["raw_text"],
                            row["size_bytes"],
                            row["content_hash"],
                            row["metadata"],
                            row["outcome"],
                            row["n_steps"],
                            row["n_agents"],
                            row["n_agent_switches"],
                            row["n_chars"],
                            row["n_lines"],
                            row["n_repeated_steps"],
                            row["agents"],
                            row["import_job_id"],
                            self.now,
                        )
                    )
            tree = any(_has_tree(p.parsed) for p in pending)
            addressed = any(st.recipient for p in pending for st in p.parsed.steps)
            columns = (_STEP_COLUMNS + _TREE_COLUMNS if tree else _STEP_COLUMNS) + (("recipient",) if addressed else ())
            with _copy(pg, Step._meta.db_table, columns) as copy:
                write = copy.write_row
                for trace_id, p in zip(ids, pending, strict=True):
                    for st in p.parsed.steps:
                        row = (
                            trace_id,
                            st.index,
                            st.agent[:200],
                            st.kind,
                            st.content,
                            st.line_start,
                            st.line_end,
                            st.details,
                        )
                        if tree:
                            row += _tree_values(st)
                        write(row + (st.recipient[:200],) if addressed else row)
        return ids


def _has_tree(parsed: ParsedTrace) -> bool:
    return any(st.parent is not None or st.model or st.input_tokens is not None or st.started_at for st in parsed.steps)


def _promote_details(st: ParsedStep) -> None:
    """Model, tokens and duration that a flat format kept in ``details`` fill the step's columns,
    so the viewer shows them the same way for every format (``details`` keeps the rest, e.g. a
    timestamp as written)."""
    d = st.details
    if not d:
        return
    if not st.model and d.get("model"):
        st.model = str(d["model"])[:100]
    for key in ("input_tokens", "output_tokens", "duration_ms"):
        value = d.get(key)
        if getattr(st, key) is None and isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            setattr(st, key, int(value))


def _tree_values(st: ParsedStep) -> tuple:
    """parent_index, model, input_tokens, output_tokens, started_at, duration_ms (None when not given)."""
    started = datetime.fromisoformat(st.started_at) if st.started_at else None
    return (st.parent, st.model[:100], st.input_tokens, st.output_tokens, started, st.duration_ms)


def _dumps(obj: Any) -> bytes | str:
    """JSON for a jsonb column: orjson (several times faster on the 250k step ``details`` of a
    MAST-Data file, most of them empty), the standard library for what orjson cannot write."""
    if not obj and isinstance(obj, dict):
        return b"{}"
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, default=str)


_EMPTY_JSONB = b"\x01{}"  # binary jsonb: a version byte, then the JSON text


class _JsonbCopyDumper(JsonbBinaryDumper):
    """The jsonb columns of the binary COPY (each step's ``details``, each trace's ``metadata``):
    the same bytes as psycopg's dumper with ``_dumps``, in one call per value instead of three,
    and the empty ``details`` of most steps as a constant (250k of them in a MAST-Data file)."""

    _dumps = _dumps  # psycopg's dump() (wrappers such as ``Jsonb``) uses it too, as set_json_dumps did

    def dump(self, obj: Any) -> bytes | None:
        if type(obj) is dict and not obj:
            return _EMPTY_JSONB
        if isinstance(obj, Json | Jsonb):  # a wrapper may bring its own dumps: psycopg's way
            return super().dump(obj)
        data = _dumps(obj)
        return b"\x01" + (data.encode() if isinstance(data, str) else data)


_COLUMN_TYPES: dict[str, dict[str, int]] = {}


def _step_checks_immediate(pg: Any) -> None:
    """Check any foreign key of the steps table as each row arrives, not all at COMMIT: Django
    makes foreign keys DEFERRABLE INITIALLY DEFERRED, so the ~250k checks of a MAST-Data file
    would run after the last row, with the importer waiting. The step's key to its trace has no
    constraint since traces migration 0022 (see ``Step.trace``); this keeps a database that still
    has one (a migration rolled back) from paying at COMMIT."""
    pg.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f' AND condeferrable",
        [Step._meta.db_table],
    )
    names = [row[0] for row in pg.fetchall()]
    if names:
        pg.execute(f"SET CONSTRAINTS {', '.join(_quote(n) for n in names)} IMMEDIATE")


@contextmanager
def _copy(pg: Any, table: str, columns: tuple[str, ...]) -> Iterator[Any]:
    """A binary COPY into ``table``: no text escaping on either side (the steps' text is most of an
    import's bytes). Binary COPY needs each column's exact type, read once from the catalog."""
    types = _COLUMN_TYPES.get(table)
    if types is None:
        pg.execute("SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0", [table])
        types = _COLUMN_TYPES[table] = {name: int(oid) for name, oid in pg.fetchall()}
    sql = f"COPY {table} ({', '.join(_quote(c) for c in columns)}) FROM STDIN (FORMAT BINARY)"
    with pg.copy(sql, writer=QueuedLibpqWriter(pg)) as copy:
        copy.set_types([types[c] for c in columns])
        yield copy


def _quote(column: str) -> str:
    return connection.ops.quote_name(column)


def trace_row(
    *, project: Project, job: ImportJob | None, parsed: ParsedTrace, title: str, digest: str, stats: dict[str, Any]
) -> dict[str, Any]:
    raw = parsed.raw_text
    return {
        "project_id": project.pk,
        "mas_name": parsed.mas_name[:100],
        "llm_name": parsed.llm_name[:100],
        "benchmark": parsed.benchmark[:100],
        "task": parsed.task,
        "external_id": parsed.external_id[:300],
        "title": title[:300],
        "format": parsed.format[:40],
        "raw_text": raw,
        "content_hash": digest,
        "metadata": parsed.metadata,
        "outcome": parsed.outcome if parsed.outcome in ("success", "failure") else "",
        "import_job_id": job.pk if job is not None else None,
        **stats,  # the statistics, and size_bytes (the UTF-8 length, from prep.prepare)
    }
