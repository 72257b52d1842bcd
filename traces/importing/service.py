"""Importing traces: files, folders and zips in, Trace + Step rows out, all-or-nothing.

``traces_import(project=, paths_or_files=, ...)`` is the one service every import path calls
(the ``import_traces`` command, the web upload job, the API, the demo seed).

How it works
------------
1. **Collect** the inputs into sources (name shown in errors, size, opener):
   ``traces.importing.sources`` walks folders and opens zips, checked before anything is read;
   ``traces.importing.folders`` keeps the traces of ChatDev WareHouse folders and their tasks.
2. **Parse** each source with the pure parsers in ``traces.parsers``: MAST-Data JSON / JSONL is
   streamed record by record (``iter_mast_records``), anything else is decoded as UTF-8 and given
   to ``parse_trace``. (Parsing in a second process was tried and measured: on two cores shared
   with PostgreSQL it was no faster, see bench/bench_import.py.)
3. **Write** in ONE transaction: ``traces.importing.writer`` stores the new traces in batches
   (COPY on PostgreSQL, ``bulk_create`` elsewhere). Any error raises :class:`TraceImportError`
   naming the file and the record/line, and the transaction rolls back: nothing from that import
   is stored. Imports into the same project are serialised with a transaction-scoped advisory
   lock, so two concurrent imports cannot race on the duplicate check.
4. **Duplicates**: a trace whose ``content_hash`` (sha256 of the stored raw text) is already in
   the project, or earlier in the same import, is skipped and counted, never an error.

Other apps store what comes with a record through the hooks of ``traces.importing.hooks``,
called inside the same transaction. Web and API uploads run as background jobs
(``traces.importing.jobs``).

Progress
--------
``progress(ImportProgress)`` is called at most about five times a second and once at the end.
It runs while the import transaction is open, so a progress writer must not use the import's
database connection (its writes would be invisible until commit): the background job writes
progress to a small JSON file beside the uploaded files (see ``traces.importing.jobs``).
"""

from __future__ import annotations

import contextlib
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction

from traces.importing.folders import sources_from_entries
from traces.importing.hooks import ImportBatch, import_hooks
from traces.importing.prep import clean_title, mast_record_trace, prepare
from traces.importing.results import ImportProgress, ImportResult, TraceImportError
from traces.importing.sources import (
    CountingReader,
    PrefixedReader,
    Source,
    collect_entries,
    decode_text,
    looks_binary,
    read_or_refuse,
)
from traces.importing.spans import span_file_traces, span_format_of
from traces.importing.writer import TraceWriter, trace_row
from traces.models import ImportJob, Project, Trace
from traces.parsers import FORMATS, ParsedTrace, ParseError, is_mast_data, iter_mast_records, parse_trace

MAST_DATA = "mast_data"
IMPORT_FORMATS: tuple[str, ...] = ("auto", MAST_DATA, *FORMATS)

_HEAD = 65536
_PROGRESS_EVERY = 0.2  # seconds


def traces_import(
    *,
    project: Project,
    paths_or_files: Iterable[Any],
    format: str = "auto",
    by: Any = None,
    job: ImportJob | None = None,
    progress: Callable[[ImportProgress], None] | None = None,
) -> ImportResult:
    """Import files, folders and zips into `project`, all or nothing. Raises TraceImportError."""
    if format not in IMPORT_FORMATS:
        raise TraceImportError(f"unknown format {format!r}; expected one of {', '.join(IMPORT_FORMATS)}")
    zips: list[zipfile.ZipFile] = []
    try:
        sources = sources_from_entries(collect_entries(list(paths_or_files), zips))
        return _import_sources(project=project, sources=sources, format=format, by=by, job=job, progress=progress)
    finally:
        for zf in zips:
            zf.close()


def _import_sources(
    *,
    project: Project,
    sources: list[Source],
    format: str,
    by: Any,
    job: ImportJob | None,
    progress: Callable[[ImportProgress], None] | None,
) -> ImportResult:
    total = sum(s.size for s in sources)
    state = {"done": 0, "base": 0, "imported": 0, "duplicates": 0, "last": 0.0, "current": ""}

    def report(force: bool = False) -> None:
        if progress is None:
            return
        now = time.monotonic()
        if force or now - state["last"] >= _PROGRESS_EVERY:
            state["last"] = now
            progress(
                ImportProgress(
                    bytes_done=min(state["done"], total),
                    bytes_total=total,
                    imported=state["imported"],
                    duplicates=state["duplicates"],
                    current=state["current"],
                )
            )

    batch = ImportBatch(project=project, by=by, job=job)
    hooks = import_hooks()
    report(force=True)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x4D415354, project.pk])
        seen = set(Trace.objects.filter(project=project).values_list("content_hash", flat=True))
        writer = TraceWriter(batch, hooks)

        def accept(parsed: ParsedTrace, title: str, extra: dict[str, Any]) -> None:
            digest, stats = prepare(parsed)
            title = clean_title(title)
            if digest in seen:
                state["duplicates"] += 1
                for hook in hooks:  # optional: records whose trace is already stored (rounds need them)
                    if hasattr(hook, "on_duplicate"):
                        hook.on_duplicate(batch=batch, content_hash=digest, parsed=parsed, extra=extra)
                return
            seen.add(digest)
            row = trace_row(project=project, job=job, parsed=parsed, title=title, digest=digest, stats=stats)
            writer.add(parsed, row, extra)
            state["imported"] += 1

        for source in sources:
            state["current"] = source.name
            state["base"] = state["done"]
            with contextlib.closing(_parse_source(source, format, state)) as items:
                for parsed, title, extra in items:
                    accept(parsed, title, extra)
                    report()
            state["done"] = state["base"] + source.size
            report()
        writer.flush()
        for hook in hooks:
            hook.on_finish(batch=batch)
    report(force=True)
    return ImportResult(
        imported=state["imported"], duplicates=state["duplicates"], failed=0, errors=[], trace_ids=writer.trace_ids
    )


_Item = tuple[ParsedTrace, str, dict[str, Any]]


def _parse_source(source: Source, format: str, state: dict) -> Iterator[_Item]:
    """(parsed, title, extra) per trace of the source."""
    name = source.name
    with source.open() as f:
        head = read_or_refuse(f, _HEAD, name)
        if not head.strip():
            raise TraceImportError(f"{name}, line 1: the file is empty")
        if format == MAST_DATA or (format == "auto" and not looks_binary(head) and is_mast_data(head)):
            yield from _parse_mast_file(source, head, f, state)
            return
        if not looks_binary(head) and (span_fmt := span_format_of(head, format)) is not None:
            yield from span_file_traces(source, span_fmt, head, f, state)  # many traces per file, streamed
            return
        data = head + read_or_refuse(f, settings.MAST_IMPORT_MAX_FILE_BYTES + 1 - len(head), name)
    if len(data) > settings.MAST_IMPORT_MAX_FILE_BYTES:
        raise TraceImportError(f"{name}: more than {settings.MAST_IMPORT_MAX_FILE_BYTES:,} bytes; refused")
    text = decode_text(data, name)
    try:
        parsed = parse_trace(text, format=format, filename=name)
    except ParseError as e:
        raise TraceImportError(_where(name, e)) from None
    if source.task and not parsed.task:
        parsed.task = source.task
    parsed.metadata["source_file"] = name
    if source.meta:
        parsed.metadata["chatdev_meta"] = source.meta
    title = parsed.metadata.get("project_name") or PurePosixPath(name.split(":")[-1]).name
    yield parsed, str(title), {"source_file": name, "record_number": None}


def _parse_mast_file(source: Source, head: bytes, f: IO[bytes], state: dict) -> Iterator[_Item]:
    name = source.name

    def on_bytes(n: int) -> None:
        state["done"] = min(state["done"] + n, state["base"] + source.size)

    state["done"] += len(head)
    stream = CountingReader(f, name, on_bytes)
    try:
        for rec in iter_mast_records(PrefixedReader(head, stream), filename=name):
            yield mast_record_trace(rec, name)
    except ParseError as e:
        raise TraceImportError(_where(name, e)) from None


def _where(name: str, e: ParseError, *, record: int | None = None) -> str:
    parts = [name]
    rec = e.record if e.record is not None else record
    if rec is not None:
        parts.append(f"record {rec + 1}")  # counted from 1 in messages, like ParseError
    if e.line is not None:
        parts.append(f"line {e.line}")
    return f"{', '.join(parts)}: {e.reason}"
