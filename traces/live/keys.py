"""Ingest keys of the OTLP receiver: ``mast_ik_<prefix><secret>``, stored as SHA-256, found by
the prefix, compared in constant time; shown once when created; revoked, never deleted."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.core.exceptions import ValidationError
from django.utils import timezone

from traces.models import IngestKey, Project

KEY_PREFIX = "mast_ik_"
_PREFIX_CHARS = 8


def _hash(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def ingest_key_create(*, project: Project, name: str, by=None) -> tuple[IngestKey, str]:
    """A new key; returns it with the plain key, which the caller shows once."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "name the key (where it is used: 'staging exporter')"})
    while True:
        prefix = secrets.token_hex(_PREFIX_CHARS // 2)
        if not IngestKey.objects.filter(prefix=prefix).exists():
            break
    plain = f"{KEY_PREFIX}{prefix}{secrets.token_urlsafe(32)}"
    key = IngestKey.objects.create(project=project, name=name[:100], prefix=prefix, key_hash=_hash(plain),
                                   created_by=by)  # fmt: skip
    return key, plain


def ingest_key_revoke(*, key: IngestKey) -> IngestKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def ingest_key_find(plain: str) -> IngestKey | None:
    """The live (not revoked) key ``plain`` is, with its project; None for anything else."""
    if not plain or not plain.startswith(KEY_PREFIX):
        return None
    prefix = plain[len(KEY_PREFIX) : len(KEY_PREFIX) + _PREFIX_CHARS]
    key = IngestKey.objects.select_related("project").filter(prefix=prefix, revoked_at__isnull=True).first()
    if key is None or not hmac.compare_digest(key.key_hash, _hash(plain)):
        return None
    return key
