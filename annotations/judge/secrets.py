"""The API keys stored on judge connections, encrypted at rest with Fernet (``cryptography``).

Keyed from settings: ``MAST_SECRETS_KEYS`` (Fernet keys, newest first; older ones still decrypt,
so a key can be rotated), else a key derived from ``SECRET_KEY`` with HKDF-SHA256. The plain key
exists only in the worker's memory for the length of a call and in the form field a manager
types it into; it is never rendered back, serialized, logged or exported (tests scan for it).
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from annotations.judge.providers.base import PermanentError


class SecretUnreadable(PermanentError):
    """A stored key that the site's current keys cannot decrypt (SECRET_KEY or MAST_SECRETS_KEYS changed)."""


def _fernet() -> MultiFernet:
    configured = [k.strip() for k in (getattr(settings, "MAST_SECRETS_KEYS", "") or "").split(",") if k.strip()]
    if configured:
        return MultiFernet([Fernet(k.encode()) for k in configured])
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"mast-studio judge connection keys").derive(
        settings.SECRET_KEY.encode()
    )
    return MultiFernet([Fernet(base64.urlsafe_b64encode(derived))])


def secret_encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode()


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "the connection's stored API key cannot be decrypted with this site's keys "
            "(SECRET_KEY or MAST_SECRETS_KEYS changed): enter the key again on the Connections page"
        ) from None


def secret_hint(value: str) -> str:
    """The last 4 characters, shown so a manager can tell keys apart (nothing for short keys)."""
    return value[-4:] if len(value) >= 16 else ""
