"""An import's inputs: files, folders and zips become entries; reading them safely.

``collect_entries`` turns what the caller gave (paths, or file objects such as Django's
``UploadedFile``) into one :class:`Entry` per file. Folders are walked recursively (hidden files,
``__MACOSX`` and ``__pycache__`` skipped); ``.zip`` files are opened in place and checked before
anything is read: member names (no ``..``, no absolute paths), member count, total uncompressed
size, per-member size and compression ratio (limits from the ``MAST_IMPORT_MAX_*`` settings).
``traces.importing.folders`` then groups the entries into the :class:`Source` s that are parsed.

The readers below decode UTF-8 text, refuse binary data, enforce the per-file limit while
streaming, and turn a corrupt zip member into a :class:`TraceImportError` naming the file.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings

from traces.importing.results import TraceImportError

_ZIP_RATIO_FLOOR = 1024**2  # small members may compress well; the ratio limit applies from 1 MB up
_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error)


@dataclass
class Source:
    name: str  # as shown in messages: "upload.zip:run/a.log", "traces/x.json"
    size: int
    opener: Callable[[], IO[bytes]]
    task: str = ""  # ChatDev: from the .prompt beside the .log
    meta: dict = field(default_factory=dict)  # ChatDev: meta.txt
    # Set for a file that is read with another one and is no trace itself (ChatDev's .prompt,
    # meta.txt, configs, generated code): what it is, for the file's line in the import report.
    note: str = ""

    def open(self) -> IO[bytes]:
        try:
            return self.opener()
        except (zipfile.BadZipFile, OSError) as e:
            raise TraceImportError(f"{self.name}: cannot read the file ({e})") from None


@dataclass
class Entry:
    """A file found in a folder or zip, before ChatDev grouping."""

    name: str
    dirname: str
    basename: str
    size: int
    opener: Callable[[], IO[bytes]]


def import_limits() -> tuple[int, int, int, int]:
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


def _zip_entries(zf: zipfile.ZipFile, label: str) -> list[Entry]:
    max_file, max_total, max_ratio, max_members = import_limits()
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
            Entry(
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


def _path_entries(path: Path, label_root: Path, zips: list[zipfile.ZipFile]) -> list[Entry]:
    if path.is_dir():
        entries: list[Entry] = []
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
        Entry(
            name=label,
            dirname=str(path.parent),
            basename=path.name,
            size=path.stat().st_size,
            opener=lambda p=path: open(p, "rb"),  # noqa: SIM115 - closed by the reader
        )
    ]


def upload_size(obj: Any) -> int:
    """A file-like object's size without reading it: Django's uploaded files say it; others (open
    files, BytesIO) are measured by seeking to their end and back to where they were."""
    size = getattr(obj, "size", None)
    if size is None:
        here = obj.tell()
        size = obj.seek(0, io.SEEK_END)
        obj.seek(here)
    return size


def _upload_entries(obj: Any, index: int, zips: list[zipfile.ZipFile]) -> list[Entry]:
    """A file-like object (Django UploadedFile, open binary file, BytesIO with .name)."""
    name = os.path.basename(getattr(obj, "name", "") or f"upload-{index}")
    if name.lower().endswith(".zip"):
        obj.seek(0)
        zf = _open_zip(obj, name)
        zips.append(zf)
        return _zip_entries(zf, name)
    size = upload_size(obj)

    def opener(obj=obj):
        obj.seek(0)
        return _NoClose(obj)

    # uploaded files share one folder, so a ChatDev run's .log, .prompt and meta.txt group together
    return [Entry(name=name, dirname="<upload>", basename=name, size=size, opener=opener)]


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


def collect_entries(paths_or_files: Iterable[Any], zips: list[zipfile.ZipFile]) -> list[Entry]:
    """Every file to import; the zips opened on the way are appended to ``zips`` (the caller closes them)."""
    max_file, max_total, _, _ = import_limits()
    entries: list[Entry] = []
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
    return entries


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


def looks_binary(head: bytes) -> bool:
    """Many NULs or control bytes in the first 8 KB: an image, archive or UTF-16 file, not a trace."""
    sample = head[:8192]
    if not sample:
        return False
    control = len(sample) - len(sample.translate(None, _CONTROL))
    return sample.count(b"\x00") > len(sample) // 100 or control > len(sample) // 20


def decode_text(data: bytes, name: str) -> str:
    if looks_binary(data):
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


def read_text(opener: Callable[[], IO[bytes]], name: str, size: int) -> str:
    return decode_text(_read_bytes(opener, name, size), name)


class CountingReader:
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


def read_or_refuse(f: IO[bytes], n: int, name: str) -> bytes:
    """Read; a corrupt zip member (bad CRC, sizes that lie) refuses the import like any bad file."""
    try:
        return f.read(n)
    except _READ_ERRORS as e:
        raise TraceImportError(f"{name}: cannot read the file ({e})") from None


class PrefixedReader:
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
