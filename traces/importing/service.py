"""Importing traces: files, folders and zips in, Trace + Step rows out, all-or-nothing.

``traces_import(project=, paths_or_files=, ...)`` is the one service every import path calls
(the ``import_traces`` command, the web upload job, the API, the demo seed).

How it works
------------
1. **Collect** the inputs into sources (name shown in errors, size, opener). Folders are walked
   recursively (hidden files and ``__MACOSX`` skipped); ``.zip`` files are opened in place and
   checked before anything is read: member names (no ``..``, no absolute paths), member count,
   total uncompressed size, per-member size and compression ratio. ChatDev WareHouse folders
   (a folder with a ``meta.txt`` or a ``*.prompt``) contribute their ``.log`` files as traces,
   the ``.prompt`` as the task and ``meta.txt`` as metadata; the generated code and config files
   beside them are not traces and are skipped.
2. **Parse** each source with the pure parsers in ``traces.parsers``: MAST-Data JSON / JSONL is
   streamed record by record (``iter_mast_records``), anything else is decoded as UTF-8 and given
   to ``parse_trace``. (Parsing in a second process was tried and measured: on two cores shared
   with PostgreSQL it was no faster, see bench/bench_import.py.) The COPY data is sent by
   psycopg's queued writer thread, so the server works while the next rows are parsed.
3. **Write** in ONE transaction: on PostgreSQL, trace ids are reserved from the sequence and the
   Trace and Step rows go in with ``COPY`` in batches (a few MB each), so the 200 MB MAST-Data
   file never sits in memory; elsewhere (the SQLite demo) the ORM's ``bulk_create`` does it.
   Any error raises :class:`TraceImportError` naming the file and the record/line, and the
   transaction rolls back: nothing from that import is stored. Imports into the same project are
   serialised with a transaction-scoped advisory lock, so two concurrent imports cannot race on
   the duplicate check.
4. **Duplicates**: a trace whose ``content_hash`` (sha256 of the stored raw text) is already in
   the project, or earlier in the same import, is skipped and counted, never an error.

Hooks
-----
Other apps store what comes WITH a record without this module knowing about them
(dependencies point taxonomy <- traces <- annotations). ``register_import_hook(hook)``; a hook
has two methods (and an optional third), all called inside the import transaction (raise to
abort the whole import):

* ``on_trace(*, batch, trace_id, parsed, extra)`` for each NEWLY created trace (not for
  duplicates). ``parsed`` is the ``ParsedTrace``; ``extra`` is a dict with ``source_file`` (name
  as shown in errors) and ``record_number`` (MAST-Data record index, None for native files), and
  for MAST-Data records ``trace_id``, ``mas_name``, ``benchmark_name``, ``mast_annotation``
  (``{"1.1": 0|1|None, ...}`` or None), ``round`` and ``annotations`` (the human-labelled file's
  ``[{"failure mode": ..., "annotator_1": ..., ...}]``, or None).
* ``on_finish(*, batch)`` once at the end, still inside the transaction, for bulk writes.
* optional ``on_duplicate(*, batch, content_hash, parsed, extra)`` for a record whose trace is
  already in the project (or earlier in this import); the trace row exists by ``on_finish``.

``batch`` is an :class:`ImportBatch` with ``project``, ``by`` (user or None), ``job`` (ImportJob
or None) and ``state``, a dict in which hooks keep their own data (key it by your app name).
The annotations app registers the hook that stores MAST-Data's ``mast_annotation`` as the
"MAST-Data judge" rater's labels (``annotations/importing.py``); the rounds area may register one
that turns ``round`` / ``annotations`` into completed calibration rounds.

Progress
--------
``progress(ImportProgress)`` is called at most about five times a second and once at the end.
It runs while the import transaction is open, so a progress writer must not use the import's
database connection (its writes would be invisible until commit): the background job writes
progress to a small JSON file beside the uploaded files (see "jobs" below).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from psycopg.copy import QueuedLibpqWriter

from traces.importing.prep import clean_title, mast_record_trace, prepare
from traces.models import ImportJob, Project, Step, Trace
from traces.parsers import FORMATS, ParsedTrace, ParseError, is_mast_data, iter_mast_records, parse_trace

logger = logging.getLogger(__name__)

MAST_DATA = "mast_data"
IMPORT_FORMATS: tuple[str, ...] = ("auto", MAST_DATA, *FORMATS)

_HEAD = 65536
_BATCH_BYTES = 8 * 1024**2  # flush buffered rows to the database every ~8 MB of trace text
_BATCH_TRACES = 500
_ZIP_RATIO_FLOOR = 1024**2  # small members may compress well; the ratio limit applies from 1 MB up
_PROGRESS_EVERY = 0.2  # seconds
_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error)


class TraceImportError(Exception):
    """An import was refused whole; the message names the file and the record/line."""

    def __init__(self, message: str, *, result: ImportResult | None = None) -> None:
        super().__init__(message)
        self.result = result or ImportResult(imported=0, duplicates=0, failed=1, errors=[message])


@dataclass
class ImportResult:
    imported: int
    duplicates: int
    failed: int
    errors: list[str] = field(default_factory=list)
    trace_ids: list[int] = field(default_factory=list)


@dataclass
class ImportProgress:
    bytes_done: int
    bytes_total: int
    imported: int
    duplicates: int
    current: str = ""


@dataclass
class ImportBatch:
    """What hooks see: the import's context and a scratch dict for their own state."""

    project: Project
    by: Any = None
    job: ImportJob | None = None
    state: dict = field(default_factory=dict)


_HOOKS: list[Any] = []


def register_import_hook(hook: Any) -> None:
    """Add a hook (see the module docstring); registering the same class twice keeps one."""
    if not (hasattr(hook, "on_trace") and hasattr(hook, "on_finish")):
        raise TypeError("an import hook needs on_trace(*, batch, trace_id, parsed, extra) and on_finish(*, batch)")
    if any(type(h) is type(hook) for h in _HOOKS):
        return
    _HOOKS.append(hook)


def import_hooks() -> tuple[Any, ...]:
    return tuple(_HOOKS)


# ---------------------------------------------------------------------------------------- sources


@dataclass
class _Source:
    name: str  # as shown in messages: "upload.zip:run/a.log", "traces/x.json"
    size: int
    opener: Callable[[], IO[bytes]]
    task: str = ""  # ChatDev: from the .prompt beside the .log
    meta: dict = field(default_factory=dict)  # ChatDev: meta.txt


@dataclass
class _Entry:
    """A file found in a folder or zip, before ChatDev grouping."""

    name: str
    dirname: str
    basename: str
    size: int
    opener: Callable[[], IO[bytes]]


def _limits() -> tuple[int, int, int, int]:
    return (
        settings.MAST_IMPORT_MAX_FILE_BYTES,
        settings.MAST_IMPORT_MAX_TOTAL_BYTES,
        settings.MAST_IMPORT_MAX_ZIP_RATIO,
        settings.MAST_IMPORT_MAX_ZIP_MEMBERS,
    )


def _skip_name(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX" or part == "__pycache__"


def _unsafe_member(name: str) -> bool:
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return True
    return any(part == ".." for part in re.split(r"[/\\]", name))


def _zip_entries(zf: zipfile.ZipFile, label: str) -> list[_Entry]:
    max_file, max_total, max_ratio, max_members = _limits()
    infos = zf.infolist()
    if len(infos) > max_members:
        raise TraceImportError(f"{label}: the zip has {len(infos)} members; the limit is {max_members}")
    total = 0
    entries = []
    for info in infos:
        name = info.filename
        if _unsafe_member(name):
            raise TraceImportError(f"{label}: unsafe path in zip member {name!r} (absolute or '..'); refused")
        if info.is_dir():
            continue
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if any(_skip_name(p) for p in parts):
            continue
        where = f"{label}:{name}"
        if info.file_size > max_file:
            raise TraceImportError(f"{where}: {info.file_size:,} bytes uncompressed; the limit is {max_file:,} bytes")
        total += info.file_size
        if total > max_total:
            raise TraceImportError(f"{where}: the zip expands to more than {max_total:,} bytes (zip bomb?); refused")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size >= _ZIP_RATIO_FLOOR and ratio > max_ratio:
            raise TraceImportError(
                f"{where}: compression ratio {ratio:.0f}:1 is over the limit {max_ratio}:1 (zip bomb?); refused"
            )
        entries.append(
            _Entry(
                name=where,
                dirname=str(PurePosixPath(*parts[:-1])) if len(parts) > 1 else "",
                basename=parts[-1],
                size=info.file_size,
                opener=lambda info=info: zf.open(info),
            )
        )
    return entries


def _open_zip(fileobj: IO[bytes] | str | Path, label: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError) as e:
        raise TraceImportError(f"{label}: not a readable zip file ({e})") from None


def _path_entries(path: Path, label_root: Path, zips: list[zipfile.ZipFile]) -> list[_Entry]:
    if path.is_dir():
        entries: list[_Entry] = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not _skip_name(d))
            for fn in sorted(filenames):
                if _skip_name(fn):
                    continue
                entries.extend(_path_entries(Path(dirpath) / fn, label_root, zips))
        return entries
    if not path.exists():
        raise TraceImportError(f"{path}: no such file or folder")
    label = str(path.relative_to(label_root)) if path.is_relative_to(label_root) else str(path)
    if path.suffix.lower() == ".zip":
        zf = _open_zip(path, label)
        zips.append(zf)
        return _zip_entries(zf, label)
    return [
        _Entry(
            name=label,
            dirname=str(path.parent),
            basename=path.name,
            size=path.stat().st_size,
            opener=lambda p=path: open(p, "rb"),  # noqa: SIM115 - closed by the reader
        )
    ]


def _upload_entries(obj: Any, index: int, zips: list[zipfile.ZipFile]) -> list[_Entry]:
    """A file-like object (Django UploadedFile, open binary file, BytesIO with .name)."""
    name = os.path.basename(getattr(obj, "name", "") or f"upload-{index}")
    if name.lower().endswith(".zip"):
        obj.seek(0)
        zf = _open_zip(obj, name)
        zips.append(zf)
        return _zip_entries(zf, name)
    size = getattr(obj, "size", None)
    if size is None:
        obj.seek(0, io.SEEK_END)
        size = obj.tell()

    def opener(obj=obj):
        obj.seek(0)
        return _NoClose(obj)

    # uploaded files share one folder, so a ChatDev run's .log, .prompt and meta.txt group together
    return [_Entry(name=name, dirname="<upload>", basename=name, size=size, opener=opener)]


class _NoClose(io.RawIOBase):
    """Reads from a caller's file object without closing it."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        return self.f.read(n)

    def readinto(self, b) -> int:  # pragma: no cover - read() is what our readers use
        data = self.f.read(len(b))
        b[: len(data)] = data
        return len(data)


def _group_chatdev(entries: list[_Entry]) -> list[_Source]:
    """One source per file, except in ChatDev WareHouse folders: .log files only, with task and meta."""
    by_dir: dict[str, list[_Entry]] = {}
    for e in entries:
        by_dir.setdefault(e.dirname, []).append(e)
    sources: list[_Source] = []
    for e in entries:
        siblings = by_dir[e.dirname]
        prompts = [s for s in siblings if s.basename.endswith(".prompt")]
        metas = [s for s in siblings if s.basename == "meta.txt"]
        logs = [s for s in siblings if s.basename.endswith(".log")]
        if not (logs and (prompts or metas)):
            sources.append(_Source(name=e.name, size=e.size, opener=e.opener))
            continue
        if e not in logs:
            if _chatdev_companion(e.basename):
                continue  # the run's .prompt, meta.txt, configs and generated code are not traces
            sources.append(_Source(name=e.name, size=e.size, opener=e.opener))
            continue
        task = ""
        prompt = next((p for p in prompts if e.basename.startswith(p.basename[: -len(".prompt")])), None)
        one_run = len(logs) == 1  # a folder of one run: its .prompt and meta.txt belong to its .log
        if prompt is None and len(prompts) == 1 and one_run:
            prompt = prompts[0]
        if prompt is not None:
            task = _read_text(prompt.opener, prompt.name, prompt.size).strip()
        meta = {}
        if metas and one_run:
            meta = _chatdev_meta(_read_text(metas[0].opener, metas[0].name, metas[0].size))
        if not task and meta.get("Task"):
            task = meta["Task"]
        sources.append(_Source(name=e.name, size=e.size, opener=e.opener, task=task, meta=meta))
    return sources


_CHATDEV_CONFIGS = frozenset({"ChatChainConfig.json", "PhaseConfig.json", "RoleConfig.json", "meta.txt"})
_CHATDEV_ARTIFACTS = (".prompt", ".py", ".md", ".png", ".jpg", ".jpeg", ".gif", ".pyc", ".csv", ".html", ".css", ".js")


def _chatdev_companion(basename: str) -> bool:
    """Files a ChatDev WareHouse folder holds beside its .log that are not traces."""
    return (
        basename in _CHATDEV_CONFIGS or basename.lower().endswith(_CHATDEV_ARTIFACTS) or basename == "requirements.txt"
    )


def _chatdev_meta(text: str) -> dict[str, str]:
    """meta.txt: blocks of "Key:" followed by its value lines, separated by blank lines."""
    meta: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        m = re.fullmatch(r"([A-Z][\w ]{0,40}):\s*", line)
        if m:
            key = m.group(1)
            meta[key] = ""
        elif key is not None:
            meta[key] = (meta[key] + "\n" + line) if meta[key] else line.strip()
    return {k: v.strip() for k, v in meta.items()}


def _collect(paths_or_files: Iterable[Any], zips: list[zipfile.ZipFile]) -> list[_Source]:
    max_file, max_total, _, _ = _limits()
    entries: list[_Entry] = []
    for i, item in enumerate(paths_or_files):
        if isinstance(item, str | os.PathLike):
            path = Path(item)
            root = path.parent if path.is_dir() else path.parent
            entries.extend(_path_entries(path, root, zips))
        elif hasattr(item, "read"):
            entries.extend(_upload_entries(item, i, zips))
        else:
            raise TypeError(f"cannot import {item!r}: expected a path or a binary file object")
    total = 0
    for e in entries:
        if e.size > max_file:
            raise TraceImportError(f"{e.name}: {e.size:,} bytes; the limit per file is {max_file:,} bytes")
        total += e.size
    if total > max_total:
        raise TraceImportError(f"the import holds {total:,} bytes; the limit per import is {max_total:,} bytes")
    if not entries:
        raise TraceImportError("nothing to import: no files found")
    return _group_chatdev(entries)


# ---------------------------------------------------------------------------------------- reading


def _read_bytes(opener: Callable[[], IO[bytes]], name: str, size: int) -> bytes:
    max_file = settings.MAST_IMPORT_MAX_FILE_BYTES
    try:
        with opener() as f:
            data = f.read(max_file + 1)
    except _READ_ERRORS as e:
        raise TraceImportError(f"{name}: cannot read the file ({e})") from None
    if len(data) > max_file:
        raise TraceImportError(f"{name}: more than {max_file:,} bytes; the limit per file is {max_file:,} bytes")
    return data


_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\x0c\x1b") + b"\x7f"


def _looks_binary(head: bytes) -> bool:
    """Many NULs or control bytes in the first 8 KB: an image, archive or UTF-16 file, not a trace."""
    sample = head[:8192]
    if not sample:
        return False
    control = len(sample) - len(sample.translate(None, _CONTROL))
    return sample.count(b"\x00") > len(sample) // 100 or control > len(sample) // 20


def _decode(data: bytes, name: str) -> str:
    if _looks_binary(data):
        raise TraceImportError(f"{name}, line 1: binary data (NUL bytes), not a UTF-8 text trace; unknown format")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TraceImportError(
            f"{name}, line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save the file as UTF-8"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _read_text(opener: Callable[[], IO[bytes]], name: str, size: int) -> str:
    return _decode(_read_bytes(opener, name, size), name)


class _Counting:
    """A read()-able that counts bytes for progress and enforces the per-file limit."""

    def __init__(self, f: IO[bytes], name: str, on_bytes: Callable[[int], None]) -> None:
        self.f, self.name, self.on_bytes = f, name, on_bytes
        self.n = 0
        self.limit = settings.MAST_IMPORT_MAX_FILE_BYTES

    def read(self, n: int = -1) -> bytes:
        try:
            data = self.f.read(n)
        except _READ_ERRORS as e:
            raise TraceImportError(f"{self.name}: cannot read the file ({e})") from None
        self.n += len(data)
        if self.n > self.limit:
            raise TraceImportError(f"{self.name}: more than {self.limit:,} bytes; the limit per file is {self.limit:,}")
        self.on_bytes(len(data))
        return data


# ---------------------------------------------------------------------------------------- writing

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
_STEP_COLUMNS = ("trace_id", "index", "agent", "kind", "content", "line_start", "line_end")


@dataclass
class _Pending:
    parsed: ParsedTrace
    row: dict[str, Any]
    extra: dict[str, Any]


class _Writer:
    """Buffers new traces and flushes them in batches (COPY on PostgreSQL, bulk_create elsewhere)."""

    def __init__(self, batch: ImportBatch, hooks: tuple[Any, ...]) -> None:
        self.batch = batch
        self.hooks = hooks
        self.pending: list[_Pending] = []
        self.pending_bytes = 0
        self.trace_ids: list[int] = []
        self.postgres = connection.vendor == "postgresql"
        self.now = timezone.now()

    def add(self, parsed: ParsedTrace, row: dict[str, Any], extra: dict[str, Any]) -> None:
        self.pending.append(_Pending(parsed, row, extra))
        self.pending_bytes += row["size_bytes"]
        if self.pending_bytes >= _BATCH_BYTES or len(self.pending) >= _BATCH_TRACES:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        ids = self._write_postgres(pending) if self.postgres else self._write_orm(pending)
        self.trace_ids.extend(ids)
        for p, trace_id in zip(pending, ids, strict=True):
            for hook in self.hooks:
                hook.on_trace(batch=self.batch, trace_id=trace_id, parsed=p.parsed, extra=p.extra)

    def _write_postgres(self, pending: list[_Pending]) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [Trace._meta.db_table, len(pending)],
            )
            ids = [r[0] for r in cursor.fetchall()]
            pg = cursor.cursor  # the psycopg cursor under Django's wrapper
            trace_sql = f"COPY {Trace._meta.db_table} ({', '.join(_quote(c) for c in _TRACE_COLUMNS)}) FROM STDIN"
            with pg.copy(trace_sql, writer=QueuedLibpqWriter(pg)) as copy:
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
                            json.dumps(row["metadata"], ensure_ascii=False),
                            row["outcome"],
                            row["n_steps"],
                            row["n_agents"],
                            row["n_agent_switches"],
                            row["n_chars"],
                            row["n_lines"],
                            row["n_repeated_steps"],
                            json.dumps(row["agents"], ensure_ascii=False),
                            row["import_job_id"],
                            self.now,
                        )
                    )
            step_sql = f"COPY {Step._meta.db_table} ({', '.join(_quote(c) for c in _STEP_COLUMNS)}) FROM STDIN"
            with pg.copy(step_sql, writer=QueuedLibpqWriter(pg)) as copy:
                write = copy.write_row
                for trace_id, p in zip(ids, pending, strict=True):
                    for st in p.parsed.steps:
                        write((trace_id, st.index, st.agent[:200], st.kind, st.content, st.line_start, st.line_end))
        return ids

    def _write_orm(self, pending: list[_Pending]) -> list[int]:
        traces = [Trace(**p.row) for p in pending]
        Trace.objects.bulk_create(traces)
        steps = [
            Step(
                trace_id=t.pk,
                index=st.index,
                agent=st.agent[:200],
                kind=st.kind,
                content=st.content,
                line_start=st.line_start,
                line_end=st.line_end,
            )
            for t, p in zip(traces, pending, strict=True)
            for st in p.parsed.steps
        ]
        Step.objects.bulk_create(steps, batch_size=500)
        return [t.pk for t in traces]


def _quote(column: str) -> str:
    return connection.ops.quote_name(column)


def _trace_row(
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
        "size_bytes": len(raw.encode("utf-8")),
        "content_hash": digest,
        "metadata": parsed.metadata,
        "outcome": parsed.outcome if parsed.outcome in ("success", "failure") else "",
        "import_job_id": job.pk if job is not None else None,
        **stats,
    }


# ---------------------------------------------------------------------------------------- service


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
        sources = _collect(list(paths_or_files), zips)
        return _import_sources(project=project, sources=sources, format=format, by=by, job=job, progress=progress)
    finally:
        for zf in zips:
            zf.close()


def _import_sources(
    *,
    project: Project,
    sources: list[_Source],
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
        writer = _Writer(batch, hooks)

        def accept(
            parsed: ParsedTrace, title: str, extra: dict[str, Any], digest: str | None, stats: dict | None
        ) -> None:
            if digest is None or stats is None:  # not prepared by the parser process
                digest, stats = prepare(parsed)
                title = clean_title(title)
            if digest in seen:
                state["duplicates"] += 1
                for hook in hooks:  # optional: records whose trace is already stored (rounds need them)
                    if hasattr(hook, "on_duplicate"):
                        hook.on_duplicate(batch=batch, content_hash=digest, parsed=parsed, extra=extra)
                return
            seen.add(digest)
            row = _trace_row(project=project, job=job, parsed=parsed, title=title, digest=digest, stats=stats)
            writer.add(parsed, row, extra)
            state["imported"] += 1

        for source in sources:
            state["current"] = source.name
            state["base"] = state["done"]
            with contextlib.closing(_parse_source(source, format, state)) as items:
                for parsed, title, extra, digest, stats in items:
                    accept(parsed, title, extra, digest, stats)
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


def _read_or_refuse(f: IO[bytes], n: int, name: str) -> bytes:
    """Read; a corrupt zip member (bad CRC, sizes that lie) refuses the import like any bad file."""
    try:
        return f.read(n)
    except _READ_ERRORS as e:
        raise TraceImportError(f"{name}: cannot read the file ({e})") from None


_Item = tuple[ParsedTrace, str, dict[str, Any], "str | None", "dict | None"]


def _parse_source(source: _Source, format: str, state: dict) -> Iterator[_Item]:
    """(parsed, title, extra, digest, stats) per trace; digest and stats are None when not computed yet."""
    name = source.name
    try:
        f = source.opener()
    except (zipfile.BadZipFile, OSError) as e:
        raise TraceImportError(f"{name}: cannot read the file ({e})") from None
    with f:
        head = _read_or_refuse(f, _HEAD, name)
        if not head.strip():
            raise TraceImportError(f"{name}, line 1: the file is empty")
        if format == MAST_DATA or (format == "auto" and not _looks_binary(head) and is_mast_data(head)):
            yield from _parse_mast_file(source, head, f, state)
            return
        data = head + _read_or_refuse(f, settings.MAST_IMPORT_MAX_FILE_BYTES + 1 - len(head), name)
    if len(data) > settings.MAST_IMPORT_MAX_FILE_BYTES:
        raise TraceImportError(f"{name}: more than {settings.MAST_IMPORT_MAX_FILE_BYTES:,} bytes; refused")
    text = _decode(data, name)
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
    yield parsed, str(title), {"source_file": name, "record_number": None}, None, None


def _parse_mast_file(source: _Source, head: bytes, f: IO[bytes], state: dict) -> Iterator[_Item]:
    name = source.name

    def on_bytes(n: int) -> None:
        state["done"] = min(state["done"] + n, state["base"] + source.size)

    state["done"] += len(head)
    stream = _Counting(f, name, on_bytes)
    try:
        for rec in iter_mast_records(_Prefixed(head, stream), filename=name):
            parsed, title, extra = mast_record_trace(rec, name)
            yield parsed, title, extra, None, None
    except ParseError as e:
        raise TraceImportError(_where(name, e)) from None


class _Prefixed:
    """Binary reader that returns already-read head bytes first."""

    def __init__(self, head: bytes, f: Any) -> None:
        self.head, self.f = head, f

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n is None or n < 0 or n >= len(self.head):
                out, self.head = self.head, b""
                if n is not None and n > len(out):
                    out += self.f.read(n - len(out))
                return out
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.f.read(n)


def _where(name: str, e: ParseError, *, record: int | None = None) -> str:
    parts = [name]
    rec = e.record if e.record is not None else record
    if rec is not None:
        parts.append(f"record {rec + 1}")  # counted from 1 in messages, like ParseError
    if e.line is not None:
        parts.append(f"line {e.line}")
    return f"{', '.join(parts)}: {e.reason}"


# ---------------------------------------------------------------------------------------- jobs
#
# Web and API uploads run as background jobs. Progress: the import holds one transaction on the
# default connection, so progress rows written through it would stay invisible until the end.
# The job writes its progress to a small JSON file beside the uploads (MEDIA_ROOT/imports/<id>.
# progress.json, replaced atomically); pages and the API read it while the job runs. This works
# the same on PostgreSQL and on the SQLite demo (where a second writer connection would block on
# the import's write lock) and needs no extra service: the worker and the web process already
# share MEDIA_ROOT for the uploaded files. The final figures go to the ImportJob row.

_UPLOAD_CHUNK = 1024**2


def import_dir() -> Path:
    return Path(settings.MEDIA_ROOT) / "imports"


def _progress_path(job_id: int) -> Path:
    return import_dir() / f"{job_id}.progress.json"


def _safe_upload_name(name: str, taken: set[str]) -> str:
    from django.utils.text import get_valid_filename

    base = os.path.basename(name.replace("\\", "/")) or "upload"
    try:
        base = get_valid_filename(base)
    except Exception:  # noqa: BLE001 - SuspiciousFileOperation for names like ".."
        base = "upload"
    stem, dot, ext = base.partition(".")
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}{dot}{ext}"
    taken.add(candidate)
    return candidate


def import_job_create(*, project: Project, by: Any, files: list[Any], format: str = "auto") -> ImportJob:
    """Save uploaded files to MEDIA_ROOT/imports/<job id>/ and queue the job (after commit).

    Limits the upload can be checked against without reading it are checked here, so the
    uploader hears at once; everything else is checked by the job, which fails whole.
    """
    if format not in IMPORT_FORMATS:
        raise TraceImportError(f"unknown format {format!r}; expected one of {', '.join(IMPORT_FORMATS)}")
    if not files:
        raise TraceImportError("choose at least one file (trace files or a .zip)")
    max_file, max_total, _, _ = _limits()
    total = 0
    for f in files:
        size = getattr(f, "size", 0) or 0
        if size > max_file:
            name = os.path.basename(f.name)
            raise TraceImportError(f"{name}: {size:,} bytes; the limit per file is {max_file:,} bytes")
        total += size
    if total > max_total:
        raise TraceImportError(f"the upload holds {total:,} bytes; the limit per import is {max_total:,} bytes")

    from traces.importing.tasks import import_job as import_job_task

    with transaction.atomic():
        job = ImportJob.objects.create(project=project, created_by=by, format=format, bytes_total=total)
        folder = import_dir() / str(job.pk)
        folder.mkdir(parents=True, exist_ok=True)
        names: list[str] = []
        taken: set[str] = set()
        try:
            for f in files:
                name = _safe_upload_name(f.name, taken)
                with open(folder / name, "wb") as out:
                    if hasattr(f, "chunks"):
                        for chunk in f.chunks(_UPLOAD_CHUNK):
                            out.write(chunk)
                    else:
                        shutil.copyfileobj(f, out, _UPLOAD_CHUNK)
                names.append(name)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        job.upload_dir = str(folder)
        job.file_names = names
        job.save(update_fields=["upload_dir", "file_names"])
        transaction.on_commit(lambda: import_job_task.delay(job.pk))
    return job


def _write_progress(job_id: int, p: ImportProgress) -> None:
    path = _progress_path(job_id)
    tmp = path.with_suffix(".tmp")
    data = {
        "bytes_done": p.bytes_done,
        "bytes_total": p.bytes_total,
        "n_imported": p.imported,
        "n_duplicates": p.duplicates,
        "current": p.current,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # progress is a courtesy; the import itself must not fail over it


def import_job_progress(*, job: ImportJob) -> dict[str, Any]:
    """The job's live figures: from the progress file while it runs, from the row otherwise."""
    figures = {
        "bytes_done": job.bytes_done,
        "bytes_total": job.bytes_total,
        "n_imported": job.n_imported,
        "n_duplicates": job.n_duplicates,
        "current": "",
    }
    if job.status == ImportJob.Status.RUNNING:
        with contextlib.suppress(OSError, ValueError):
            figures.update(json.loads(_progress_path(job.pk).read_text(encoding="utf-8")))
    if job.status == ImportJob.Status.DONE:
        percent = 100
    else:
        total = figures["bytes_total"]
        percent = min(99, int(100 * figures["bytes_done"] / total)) if total else 0
    figures["percent"] = percent
    figures["finished"] = job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED)
    return figures


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued job; idempotent: a finished job is left alone, a crashed one runs again whole."""
    job = ImportJob.objects.select_related("project", "created_by").get(pk=job_id)
    if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
        return job
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING, started_at=timezone.now())
    job.status = ImportJob.Status.RUNNING
    files = [Path(job.upload_dir) / name for name in job.file_names]
    fields: dict[str, Any]
    try:
        result = traces_import(
            project=job.project,
            paths_or_files=files,
            format=job.format,
            by=job.created_by,
            job=job,
            progress=lambda p: _write_progress(job.pk, p),
        )
    except TraceImportError as e:
        fields = {"status": ImportJob.Status.FAILED, "error": str(e), "n_imported": 0, "n_duplicates": 0}
    except Exception as e:  # noqa: BLE001 - a job must end in a state a person can read
        logger.exception("import job %s crashed", job.pk)
        fields = {"status": ImportJob.Status.FAILED, "error": f"internal error: {type(e).__name__}: {e}"}
    else:
        fields = {
            "status": ImportJob.Status.DONE,
            "n_imported": result.imported,
            "n_duplicates": result.duplicates,
            "bytes_done": job.bytes_total,
            "error": "",
        }
        shutil.rmtree(job.upload_dir, ignore_errors=True)  # stored in the database now
    fields["finished_at"] = timezone.now()
    ImportJob.objects.filter(pk=job.pk).update(**fields)
    _progress_path(job.pk).unlink(missing_ok=True)
    job.refresh_from_db()
    return job
