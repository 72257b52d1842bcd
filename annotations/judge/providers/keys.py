"""Which environment variables a judge run may send as its API key, and to where (pure, no Django).

A run names its key by the NAME of an environment variable of the worker (``api_key_env``) and
sends it as ``Authorization: Bearer <value>`` to its ``base_url``. Both come from a project
manager, so without a limit a manager could have the worker send ``SECRET_KEY`` or
``DATABASE_URL`` to a server of their own. The site administrator therefore lists, in the setting
``MAST_JUDGE_API_KEYS``, which variables may be used as keys and the base URL(s) each may go to:

    MAST_JUDGE_API_KEYS="OPENAI_API_KEY=https://api.openai.com/v1,VLLM_KEY=http://127.0.0.1:8001/v1"

Entries are ``NAME=URL`` separated by commas; a name given twice may go to either URL. A base
URL is allowed for a key when its scheme, host and port equal those of one of the key's URLs
and its path is that URL's path or below it (``/v1`` allows ``/v1`` and ``/v1/x``, not ``/v1x``).
URLs with a user name, password, query, fragment or ``.``/``..`` path segment never match.

The default is empty: no variable may be used. Even ``OPENAI_API_KEY`` sent only to
``https://api.openai.com/v1`` is not allowed by default: a key in the worker's environment
is not by itself consent to every project manager spending it, and one line in ``.env`` opts
in. A run without a key may point at any http(s) base URL: what it sends there is the traces'
text, which is the manager's own project data.

The check runs twice: when a run is created (``key_problems``: form, API and ``prelabel`` show
the field and the allowed names, never a value) and in the worker just before it reads the
variable (``api_key_from_env``), so a run row written straight to the database sends nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlsplit

from annotations.judge.providers.base import PermanentError

SETTING = "MAST_JUDGE_API_KEYS"
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT_PORTS = {"http": 80, "https": 443}

Allowed = Mapping[str, Sequence[str]]


class KeyRefused(PermanentError):
    """The run's key variable may not be read, or not sent to the run's base URL: the run stops."""


def _target(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path without trailing slash), or None for a URL that never matches."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return None
    path = parts.path.rstrip("/")
    if any(unquote(segment) in (".", "..") for segment in path.split("/")):
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme], path


def parse_allowed(spec: str | Allowed) -> dict[str, tuple[str, ...]]:
    """The setting as {variable name: allowed base URLs}; a malformed entry raises ValueError."""
    if isinstance(spec, Mapping):
        entries = [(name, url) for name, urls in spec.items() for url in urls]
    else:
        entries = []
        for raw in (spec or "").split(","):
            if raw.strip():
                name, sep, url = raw.strip().partition("=")
                if not sep:
                    raise ValueError(f"{SETTING}: {raw.strip()!r} is not NAME=URL")
                entries.append((name.strip(), url.strip()))
    allowed: dict[str, tuple[str, ...]] = {}
    for name, url in entries:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{SETTING}: {name!r} is not an environment variable name")
        if _target(url) is None:
            raise ValueError(f"{SETTING}: the URL for {name} is not an http(s) base URL like https://host/v1")
        allowed[name] = (*allowed.get(name, ()), url)
    return allowed


def url_allowed(base_url: str, urls: Sequence[str]) -> bool:
    target = _target(base_url)
    if target is None:
        return False
    for url in urls:
        allowed = _target(url)
        if allowed is None or allowed[:3] != target[:3]:
            continue
        if target[3] == allowed[3] or target[3].startswith(allowed[3] + "/"):
            return True
    return False


def key_problems(*, name: str, base_url: str, allowed: Allowed) -> dict[str, str]:
    """Errors per field for a run that sends the variable `name` to `base_url` ({} when fine)."""
    if not name:
        return {}
    if name not in allowed:
        names = ", ".join(sorted(allowed)) or "none"
        return {"api_key_env": f"not a variable this site allows as an API key; allowed: {names} (set in {SETTING})"}
    if not url_allowed(base_url, allowed[name]):
        return {"base_url": f"{name} may only be sent to {', '.join(allowed[name])} (set in {SETTING})"}
    return {}


def api_key_from_env(name: str, *, base_url: str, allowed: Allowed) -> str:
    """The key from the environment variable `name`, refused unless `allowed` lets it go to `base_url`.

    Local servers without auth need no key."""
    if not name:
        return "no-key"  # the library insists on some key; servers without auth ignore it
    problems = key_problems(name=name, base_url=base_url, allowed=allowed)
    if problems:
        raise KeyRefused(f"the API key variable {name} is refused: {next(iter(problems.values()))}; nothing was sent")
    value = os.environ.get(name, "")
    if not value:
        raise KeyRefused(f"The environment variable {name} (named as the API key) is not set on the worker.")
    return value
