"""The product's files through Django's storage API: uploads, import progress, releases.

Every file a web process writes and a worker reads (or the other way round) goes through the
``default`` storage (settings.STORAGES, chosen by STORAGE_URL: mast_site/storage_url.py), so web
processes and workers on different machines share nothing but PostgreSQL, Redis and the store.

Names are relative (``imports/12/run.json``, ``releases/demo/v1/demo-v1.zip``). A folder is a
prefix: it exists while a file is under it. What the API does not say well enough, this module
does once for both kinds of backend:

* ``put`` replaces a file in place (never "run_1.json" beside it) and streams a local file or an
  upload to the store in chunks (S3: a multipart upload), never a whole-file copy in memory.
* ``local_path`` is the file's path when the store is a local folder: a worker then reads the
  upload where it is; with an object store it fetches it into a private temporary folder first
  (``fetch``), since the parsers need to seek.
* ``chunks`` streams a file out (a release download) without reading it whole first, which
  django-storages' S3File would do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.http import FileResponse, HttpResponseBase, HttpResponseRedirect, StreamingHttpResponse
from django.utils.http import content_disposition_header

CHUNK = 1 << 20


def store() -> Storage:
    return default_storage


def _s3(storage: Storage) -> Any | None:
    """The S3Storage behind ``storage``, or None for any other backend."""
    return storage if hasattr(storage, "bucket_name") and hasattr(storage, "connection") else None


def is_local() -> bool:
    return local_path("") is not None


def local_path(name: str) -> Path | None:
    """The file's (or folder's) path on this machine's disk, or None with an object store."""
    try:
        return Path(store().path(name))
    except NotImplementedError:
        return None


class StorageRenamed(RuntimeError):
    pass


def put(name: str, content: bytes | IO[bytes] | File) -> str:
    """Write ``content`` to ``name``, replacing a file there (bytes on a local disk: atomically).
    Raises StorageRenamed if the backend chose another name (a store configured not to overwrite)."""
    if isinstance(content, bytes):
        path = local_path(name)
        if path is not None:  # replaced atomically: a reader never sees half of it
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(content)
            os.replace(tmp, path)
            return name
        content = ContentFile(content)
    elif not isinstance(content, File):
        content = File(content, name=name)
    saved = store().save(name, content)
    if saved != name:
        with contextlib.suppress(Exception):
            store().delete(saved)
        raise StorageRenamed(f"the storage saved {name!r} as {saved!r}: configure it to overwrite files")
    return saved


def put_file(name: str, path: Path) -> str:
    with open(path, "rb") as fh:
        return put(name, File(fh, name=path.name))


def read_bytes(name: str) -> bytes:
    with store().open(name, "rb") as fh:
        return fh.read()


def _s3_key(s3: Any, name: str) -> str:
    """The object key of ``name``, as S3Storage itself computes it (its location prefix, cleaned)."""
    from storages.utils import clean_name

    return s3._normalize_name(clean_name(name))  # noqa: SLF001


def chunks(name: str, size: int = CHUNK) -> Iterator[bytes]:
    """The file's bytes in pieces of at most ``size``, streamed from the store."""
    s3 = _s3(store())
    if s3 is not None:
        body = s3.bucket.Object(_s3_key(s3, name)).get()["Body"]
        try:
            yield from body.iter_chunks(size)
        finally:
            body.close()
        return
    with store().open(name, "rb") as fh:
        while block := fh.read(size):
            yield block


def fetch(name: str, dest: Path) -> None:
    """Copy the stored file ``name`` to the local path ``dest`` (streamed; S3: ranged parts in parallel)."""
    s3 = _s3(store())
    if s3 is not None:
        s3.bucket.download_file(_s3_key(s3, name), str(dest))
        return
    with store().open(name, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK)


def names_under(prefix: str) -> list[str]:
    """Every file's name under the folder ``prefix`` (recursively), as the store lists them."""
    prefix = prefix.strip("/")
    try:
        folders, files = store().listdir(prefix)
    except FileNotFoundError:
        return []
    names = [f"{prefix}/{f}" for f in files]
    for folder in folders:
        names += names_under(f"{prefix}/{folder}")
    return names


def folders_under(prefix: str) -> list[str]:
    """The names of the folders directly under ``prefix``."""
    try:
        return list(store().listdir(prefix.strip("/"))[0])
    except FileNotFoundError:
        return []


def exists_tree(prefix: str) -> bool:
    return bool(names_under(prefix))


def delete_tree(prefix: str) -> None:
    """Delete every file under the folder ``prefix`` (and the folder itself on a local disk).
    Refuses the storage's root (an empty prefix), which no caller means."""
    if not prefix.strip("/"):
        raise ValueError("delete_tree: refusing to delete the whole storage (an empty folder name)")
    path = local_path(prefix.strip("/"))
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in names_under(prefix):
        store().delete(name)


def delete(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        store().delete(name)


def modified(name: str) -> datetime | None:
    try:
        return store().get_modified_time(name)
    except (FileNotFoundError, OSError):
        return None


def signed_url(name: str, *, filename: str) -> str | None:
    """A link the browser can download ``name`` from directly, valid for five minutes and sent as
    an attachment called ``filename``; None where the store has no such links (a local disk)."""
    s3 = _s3(store())
    if s3 is None:
        return None
    disposition = f"attachment; filename*=UTF-8''{quote(filename)}"
    return s3.url(name, parameters={"ResponseContentDisposition": disposition})


def download_response(name: str, *, filename: str, content_type: str | None = None) -> HttpResponseBase:
    """The stored file as a download called ``filename``: a redirect to a signed link with an
    object store and MAST_STORAGE_REDIRECT on, else streamed through this process (from a local
    disk as FileResponse does, from a store in 1 MB pieces, never read whole first)."""
    if getattr(settings, "MAST_STORAGE_REDIRECT", False) and (url := signed_url(name, filename=filename)):
        return HttpResponseRedirect(url)
    path = local_path(name)
    if path is not None:
        return FileResponse(open(path, "rb"), as_attachment=True, filename=filename, content_type=content_type)  # noqa: SIM115
    size = store().size(name)  # also raises FileNotFoundError before the response starts
    response = StreamingHttpResponse(chunks(name), content_type=content_type or "application/octet-stream")
    response["Content-Length"] = str(size)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response
