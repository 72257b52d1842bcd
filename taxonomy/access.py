"""Who may change a taxonomy draft.

Taxonomies are a shared library: every signed-in user reads them, and project managers and site
staff may start a new draft from any version. Changing a draft (editing, adding, removing,
renaming, splitting or merging modes, publishing it) is narrower, because another project may be
about to publish that draft through a round:

* site staff may change any draft;
* the user who created the draft (its owner) may change it;
* so may the managers of every project that *uses* the draft: as the project's taxonomy
  version, or as the version of one of its calibration rounds.

``taxonomy`` knows nothing of projects or rounds (dependencies point taxonomy <- traces <-
annotations), so the apps that hold those register a "users of a version" function here in
their ``ready()``. Each function takes ``(*, version, user)`` and says whether ``user`` manages a
project that uses ``version``.
"""

from __future__ import annotations

from collections.abc import Callable

from taxonomy.models import TaxonomyVersion

VersionUser = Callable[..., bool]
_VERSION_USERS: dict[str, VersionUser] = {}
# name -> fn(*, version, user) -> [{"project": ..., "current": ..., "url": ...}]: projects ``user``
# manages that could move to ``version`` (the offer after publishing a revised version)
_ADOPTERS: dict[str, Callable[..., list[dict]]] = {}


def version_adopters_register(*, name: str, fn: Callable[..., list[dict]]) -> None:
    _ADOPTERS[name] = fn


def version_adoption_offers(*, version: TaxonomyVersion, user) -> list[dict]:
    """Projects ``user`` manages whose working version ``version`` is newer than (published versions only)."""
    if not user.is_authenticated or not version.is_published:
        return []
    return [offer for fn in _ADOPTERS.values() for offer in fn(version=version, user=user)]


def version_user_register(*, name: str, fn: VersionUser) -> None:
    """Register ``fn(*, version, user) -> bool`` under ``name`` (re-registering replaces it)."""
    _VERSION_USERS[name] = fn


def user_can_draft(*, user) -> bool:
    """Site staff and project managers may start drafts (and import taxonomies)."""
    if not user.is_authenticated:
        return False
    return user.is_staff or user.memberships.filter(role="manager").exists()


def version_user_can_change(*, user, version: TaxonomyVersion) -> bool:
    """May ``user`` change this draft? Published versions are frozen for everyone."""
    if not user.is_authenticated or version.is_published:
        return False
    if user.is_staff or version.created_by_id == user.pk:
        return True
    return any(fn(version=version, user=user) for fn in _VERSION_USERS.values())
