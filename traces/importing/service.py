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
4. **Duplicates** (``traces.importing.merge``): a record whose ``content_hash`` (sha256 of the
   stored raw text) is already in the project, or earlier in the same import, is not stored twice.
   When its identity (its own trace id, framework, model, benchmark) differs from the trace's and
   from the trace's other sources, it is **merged**: kept as a ``TraceSource`` of that trace, with
   the labels that came with it (hooks' ``on_duplicate``). The same record again is **skipped**.
   Both are counted apart in the result and in each file's line of the report.
5. **Report** (``traces.importing.report``): one line per file, what it became or why it was
   refused. When any file is refused nothing is stored, but the other files are still read so
   the report names every bad file at once.

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
import gc
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction

from traces.importing.folders import sources_from_entries
from traces.importing.hooks import ImportBatch, import_hooks
from traces.importing.merge import KnownTraces
from traces.importing.parquet import is_parquet, iter_parquet_traces
from traces.importing.prep import chatdev_model, clean_title, mast_record_trace, prepare
from traces.importing.report import COMPANION, IMPORTED, NOT_STORED, REFUSED, FileLine
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
from traces.models import ImportJob, Project
from traces.parsers import FORMATS, ParsedTrace, ParseError, is_mast_data, iter_mast_records, parse_traces
from traces.parsers.registry import formats

MAST_DATA = "mast_data"
IMPORT_FORMATS: tuple[str, ...] = ("auto", MAST_DATA, *FORMATS)
# What the form, the report and the API call each format (the registry's labels).
FORMAT_LABELS: dict[str, str] = {"auto": "detect automatically", MAST_DATA: "MAST-Data (JSON / JSONL of records)"}
FORMAT_LABELS.update({f.name: f.title for f in formats()})

_HEAD = 65536
_PROGRESS_EVERY = 0.2  # seconds
# records whose stored duplicates are looked up in one query: bounded by count and by their size in memory
_LOOKUP_RECORDS = 256
_LOOKUP_BYTES = 32 * 1024 * 1024


def traces_import(
    *,
    project: Project,
    paths_or_files: Iterable[Any],
    format: str = "auto",
    by: Any = None,
    job: ImportJob | None = None,
    progress: Callable[[ImportProgress], None] | None = None,
    import_rest: bool = False,
) -> ImportResult:
    """Import files, folders and zips into `project`, all or nothing. Raises TraceImportError.

    ``import_rest``: a JSONL line that is not JSON (a log whose process died mid-write) is skipped
    and listed in its file's report line instead of refusing the import; every other problem still
    refuses it, and a file whose every line is broken too."""
    if format not in IMPORT_FORMATS:
        raise TraceImportError(f"unknown format {format!r}; expected one of {', '.join(IMPORT_FORMATS)}")
    zips: list[zipfile.ZipFile] = []
    try:
        sources = sources_from_entries(collect_entries(list(paths_or_files), zips), format=format)
        with _fewer_collections():
            return _import_sources(
                project=project,
                sources=sources,
                format=format,
                by=by,
                job=job,
                progress=progress,
                import_rest=import_rest,
            )
    finally:
        for zf in zips:
            zf.close()


_gc_lock = threading.Lock()
_gc_state: dict[str, Any] = {"imports": 0, "before": None}  # imports running in this process


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while importing, as the web processes do.

    An import makes millions of small container objects (messages, steps, rows), almost none of
    them in reference cycles. With CPython's default thresholds (700, 10, 10) the 200 MB bench
    file set off ~950 collections, 8 of them full ones that walk every live object (the batch
    waiting to be written included): ~0.5 s of CPU, with the COPY writer thread waiting on the
    GIL meanwhile. With these, 2. Reference counting still frees the import's objects at once,
    so memory is unchanged. The thresholds are the process's: the first import to start raises
    them and the last one to end sets them back, whatever happens (imports in several threads of
    one process overlap); a process that switched collection off (threshold 0) is left so."""
    with _gc_lock:
        if _gc_state["imports"] == 0:
            before = gc.get_threshold()
            _gc_state["before"] = before
            if before[0] != 0:  # threshold 0: the process has switched automatic collection off
                gc.set_threshold(max(before[0], settings.MAST_GC_GEN0), max(before[1], 20), max(before[2], 20))
        _gc_state["imports"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["imports"] -= 1
            if _gc_state["imports"] == 0:
                gc.set_threshold(*_gc_state["before"])


class _Run:
    """One import under way: its counters and progress, the files' report lines, and (once the
    project's import lock is held) the known traces and the writer."""

    def __init__(
        self,
        *,
        project: Project,
        by: Any,
        job: ImportJob | None,
        sources: list[Source],
        progress: Callable[[ImportProgress], None] | None,
        import_rest: bool = False,
    ) -> None:
        self.project, self.job, self.progress, self.import_rest = project, job, progress, import_rest
        self.total = sum(s.size for s in sources)
        self.state = {"done": 0, "base": 0, "imported": 0, "duplicates": 0, "merged": 0, "last": 0.0, "current": ""}
        self.batch = ImportBatch(project=project, by=by, job=job)
        self.hooks = import_hooks()
        self.lines: list[FileLine] = []
        self.refused: list[str] = []

    def report(self, force: bool = False) -> None:
        """Tell the progress callback, at most every _PROGRESS_EVERY seconds unless forced."""
        state = self.state
        if self.progress is None:
            return
        now = time.monotonic()
        if force or now - state["last"] >= _PROGRESS_EVERY:
            state["last"] = now
            self.progress(
                ImportProgress(
                    bytes_done=min(state["done"], self.total),
                    bytes_total=self.total,
                    imported=state["imported"],
                    duplicates=state["duplicates"] + state["merged"],
                    current=state["current"],
                )
            )

    def open(self, known: KnownTraces, writer: TraceWriter) -> None:
        self.known, self.writer = known, writer

    def accept_all(self, items: Iterator[_Item], line: FileLine) -> None:
        """A file's records, in groups whose stored duplicates are looked up together (``look_up``)."""
        group: list[_Prepared] = []
        size = 0
        try:
            for parsed, title, extra in items:
                digest, stats = prepare(parsed)
                group.append((parsed, title, extra, digest, stats))
                size += stats["size_bytes"]
                if len(group) >= _LOOKUP_RECORDS or size >= _LOOKUP_BYTES:
                    self.accept_group(group, line)
                    group, size = [], 0
        except TraceImportError:
            self.accept_group(group, line)  # the records read before the refusal are counted, as one by one
            raise
        self.accept_group(group, line)

    def accept_group(self, group: list[_Prepared], line: FileLine) -> None:
        self.known.look_up([digest for _p, _t, _e, digest, _s in group])
        for parsed, title, extra, digest, stats in group:
            self.accept(parsed, title, extra, line, digest=digest, stats=stats)
            self.report()

    def accept(
        self,
        parsed: ParsedTrace,
        title: str,
        extra: dict[str, Any],
        line: FileLine,
        *,
        digest: str,
        stats: dict[str, Any],
    ) -> None:
        """One parsed trace: counted on its file's line, written when new (and nothing was refused),
        handed to the hooks when already stored."""
        title = clean_title(title)
        outcome = self.known.outcome(digest, parsed, extra)
        line.add(format=_format_label(parsed), steps=stats["n_steps"], agents=stats["agents"], outcome=outcome)
        if outcome != "new":
            self.state["merged" if outcome == "merged" else "duplicates"] += 1
            if self.refused:
                return
            for hook in self.hooks:  # optional: records whose trace is already stored (rounds need them)
                if hasattr(hook, "on_duplicate"):
                    hook.on_duplicate(batch=self.batch, content_hash=digest, parsed=parsed, extra=extra)
            return
        self.state["imported"] += 1
        if self.refused:
            return  # nothing will be stored: read on only to report every file
        row = trace_row(project=self.project, job=self.job, parsed=parsed, title=title, digest=digest, stats=stats)
        self.writer.add(parsed, row, extra)

    def read(self, source: Source, format: str) -> None:
        """One file: its traces accepted, or its line says why it was skipped or refused."""
        state = self.state
        state["current"] = source.name
        state["base"] = state["done"]
        line = FileLine(file=source.name)
        self.lines.append(line)
        if source.note:
            line.status, line.reason = COMPANION, source.note
        else:
            broken: list[tuple[int, str]] | None = [] if self.import_rest else None
            try:
                with contextlib.closing(_parse_source(source, format, state, broken)) as items:
                    self.accept_all(items, line)
                line.broken_lines = [{"line": n, "reason": why} for n, why in broken or ()]
            except TraceImportError as e:
                line.status, line.reason = REFUSED, _reason(str(e), source.name)
                self.refused.append(str(e))
        state["done"] = state["base"] + source.size
        self.report()

    def refuse(self) -> TraceImportError:
        """All or nothing: a refused file stores nothing; the error carries every file's line."""
        for other in self.lines:
            if other.status == IMPORTED:
                other.status = NOT_STORED
        refused = self.refused
        return TraceImportError(
            refused[0] if len(refused) == 1 else f"{len(refused)} files were refused: " + "; ".join(refused),
            result=_result(self.state, self.lines, []),
        )


def _import_sources(
    *,
    project: Project,
    sources: list[Source],
    format: str,
    by: Any,
    job: ImportJob | None,
    progress: Callable[[ImportProgress], None] | None,
    import_rest: bool = False,
) -> ImportResult:
    run = _Run(project=project, by=by, job=job, sources=sources, progress=progress, import_rest=import_rest)
    run.report(force=True)
    with transaction.atomic(), contextlib.ExitStack() as stack:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x4D415354, project.pk])
        known = KnownTraces(project)
        writer = TraceWriter(run.batch, run.hooks)
        run.open(known, writer)
        stack.callback(writer.close)  # before the transaction ends, whatever happens
        for source in sources:
            run.read(source, format)
        if run.refused:
            raise run.refuse()
        writer.finish()
        run.known.store_sources(job=job)
        for hook in run.hooks:
            hook.on_finish(batch=run.batch)
    run.report(force=True)
    return _result(run.state, run.lines, writer.trace_ids)


def _result(state: dict, lines: list[FileLine], trace_ids: list[int]) -> ImportResult:
    refused = [ln for ln in lines if ln.status == REFUSED]
    return ImportResult(
        imported=0 if refused else state["imported"],
        duplicates=state["duplicates"],
        merged=state["merged"],
        failed=len(refused),
        errors=[f"{ln.file}: {ln.reason}" for ln in refused],
        trace_ids=trace_ids,
        files=[ln.as_dict() for ln in lines],
    )


def _reason(message: str, name: str) -> str:
    """A refusal's message without the file name the report line already shows."""
    return message[len(name) + 2 :] if message.startswith(name + ": ") else message.removeprefix(name + ", ")


def _format_label(parsed: ParsedTrace) -> str:
    fmt = parsed.format
    inner = parsed.metadata.get("inner_format")
    label = FORMAT_LABELS.get(fmt, fmt)
    return f"{label} ({FORMAT_LABELS.get(inner, inner)})" if inner else label


_Item = tuple[ParsedTrace, str, dict[str, Any]]
_Prepared = tuple[ParsedTrace, str, dict[str, Any], str, dict[str, Any]]  # and its content hash, statistics


def _parse_source(
    source: Source, format: str, state: dict, broken: list[tuple[int, str]] | None = None
) -> Iterator[_Item]:
    """(parsed, title, extra) per trace of the source; ``broken``: see ``traces_import(import_rest=)``."""
    name = source.name
    with source.open() as f:
        head = read_or_refuse(f, _HEAD, name)
        if not head.strip():
            raise TraceImportError(f"{name}, line 1: the file is empty")
        if format == MAST_DATA or (format == "auto" and not looks_binary(head) and is_mast_data(head)):
            yield from _parse_mast_file(source, head, f, state, broken)
            return
        if not looks_binary(head) and (span_fmt := span_format_of(head, format)) is not None:
            yield from span_file_traces(source, span_fmt, head, f, state, broken)  # many traces, streamed
            return
        data = head + read_or_refuse(f, settings.MAST_IMPORT_MAX_FILE_BYTES + 1 - len(head), name)
    if len(data) > settings.MAST_IMPORT_MAX_FILE_BYTES:
        raise TraceImportError(f"{name}: more than {settings.MAST_IMPORT_MAX_FILE_BYTES:,} bytes; refused")
    if is_parquet(data):  # one trace per row (Who&When, TRAIL on the Hub); needs the whole file (footer)
        yield from iter_parquet_traces(data, name=name, format=format)
        return
    text = decode_text(data, name)
    try:
        traces = parse_traces(text, format=format, filename=name, broken=broken)
    except ParseError as e:
        raise TraceImportError(_where(name, e)) from None
    several = len(traces) > 1
    for n, parsed in enumerate(traces):
        if source.task and not parsed.task:
            parsed.task = source.task
        parsed.metadata["source_file"] = name
        if source.meta:
            parsed.metadata["chatdev_meta"] = source.meta
            parsed.llm_name = parsed.llm_name or chatdev_model(source.meta)
        base = parsed.metadata.get("project_name") or PurePosixPath(name.split(":")[-1]).name
        title = f"{base} · {parsed.external_id or f'record {n + 1}'}" if several else base
        extra = {"source_file": name, "record_number": n if several else None, "trace_id": parsed.external_id}
        labels = parsed.metadata.pop("mast_annotation", None)
        if labels:
            extra["mast_annotation"] = labels
        yield parsed, str(title), extra


def _parse_mast_file(
    source: Source, head: bytes, f: IO[bytes], state: dict, broken: list[tuple[int, str]] | None = None
) -> Iterator[_Item]:
    name = source.name

    def on_bytes(n: int) -> None:
        state["done"] = min(state["done"] + n, state["base"] + source.size)

    state["done"] += len(head)
    stream = CountingReader(f, name, on_bytes)
    try:
        n = 0
        for rec in iter_mast_records(PrefixedReader(head, stream), filename=name, broken=broken):
            n += 1
            yield mast_record_trace(rec, name)
        if n == 0 and broken:
            line, why = broken[0]
            raise ParseError(f"every line is broken ({len(broken)}); the first: {why}", filename=name, line=line)
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
