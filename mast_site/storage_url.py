"""Where the product keeps its files (uploads, import progress, releases): ``STORAGE_URL``.

One machine keeps them under MEDIA_ROOT (the default). Several machines (web processes on one
host, workers on another) share an S3-compatible object store instead, so no process needs a
disk another can see:

* unset or empty: the local filesystem under MEDIA_ROOT;
* ``file:///srv/mast/media``: the local filesystem under that folder;
* ``s3://bucket[/prefix][?endpoint_url=http://minio:9000&region=eu-west-1&addressing_style=path]``:
  Amazon S3 or any S3-compatible store (MinIO, Ceph, R2, moto). Credentials come from the usual
  AWS variables (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an instance role) or
  from the URL's user part (``s3://KEY:SECRET@bucket``, percent-encoded).

Without ``STORAGE_URL``, ``AWS_STORAGE_BUCKET_NAME`` (with ``AWS_S3_ENDPOINT_URL``,
``AWS_S3_REGION_NAME``, ``AWS_LOCATION``) selects S3 too, as django-storages documents them.

Pure: no Django import; settings.py calls ``storage_from_url``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FILESYSTEM = "django.core.files.storage.FileSystemStorage"
S3 = "storages.backends.s3.S3Storage"
# Query keys of an s3:// URL and the S3Storage option each sets.
_S3_QUERY = {
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "addressing_style": "addressing_style",
    "signature_version": "signature_version",
    "verify": "verify",
}


class StorageUrlError(ValueError):
    pass


def _s3_options(bucket: str, prefix: str) -> dict[str, Any]:
    if not bucket:
        raise StorageUrlError("STORAGE_URL: an s3:// URL needs a bucket, e.g. s3://mast-studio/prefix")
    return {
        "bucket_name": bucket,
        "location": prefix.strip("/"),
        "file_overwrite": True,  # a progress file or a rebuilt release replaces the one before it
        "default_acl": None,  # private: downloads go through the product (or a signed URL)
        "querystring_auth": True,
        "querystring_expire": 300,  # a release's signed download link lives five minutes
        "signature_version": "s3v4",
    }


def storage_from_url(url: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The STORAGES["default"] entry for ``url`` (STORAGE_URL), or from the AWS_* variables in
    ``env`` when the URL is empty. Raises StorageUrlError on a URL it cannot use."""
    url = (url or "").strip()
    if not url:
        bucket = env.get("AWS_STORAGE_BUCKET_NAME", "")
        if not bucket:
            # allow_overwrite: the progress file is replaced while an import runs (Django 5.1+)
            return {"BACKEND": FILESYSTEM, "OPTIONS": {"allow_overwrite": True}}
        options = _s3_options(bucket, env.get("AWS_LOCATION", ""))
        for var, key in (("AWS_S3_ENDPOINT_URL", "endpoint_url"), ("AWS_S3_REGION_NAME", "region_name")):
            if env.get(var):
                options[key] = env[var]
        return {"BACKEND": S3, "OPTIONS": options}
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise StorageUrlError(f"STORAGE_URL {url!r}: a file:// URL needs an absolute path (file:///srv/media)")
        return {"BACKEND": FILESYSTEM, "OPTIONS": {"allow_overwrite": True, "location": unquote(parts.path)}}
    if parts.scheme != "s3":
        raise StorageUrlError(f"STORAGE_URL {url!r}: use file:///path or s3://bucket/prefix")
    options = _s3_options(parts.hostname or "", unquote(parts.path))
    if parts.username:
        options["access_key"] = unquote(parts.username)
        options["secret_key"] = unquote(parts.password or "")
    for key, values in parse_qs(parts.query).items():
        if key not in _S3_QUERY:
            known = ", ".join(sorted(_S3_QUERY))
            raise StorageUrlError(f"STORAGE_URL: unknown option {key!r} (known: {known})")
        value: Any = values[-1]
        if key == "verify":
            value = value.lower() not in ("0", "false", "no")
        options[_S3_QUERY[key]] = value
    return {"BACKEND": S3, "OPTIONS": options}
