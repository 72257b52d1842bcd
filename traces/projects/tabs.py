"""The tabs of a project's pages: a registry, so each app adds its own pages' tabs.

``project_tab_register(key=, label=, url_name=, capability=, order=)`` in an app's ``ready()``;
the bar (``{% project_tabs project role current %}``) shows the registered tabs in ``order``,
those the user's role has the capability for, each linking to ``url_name`` reversed with the
project's slug. A tab whose URL is not installed in this build is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from traces.models import Project
from traces.projects.selectors import CAPABILITIES


@dataclass(frozen=True)
class ProjectTab:
    key: str  # what a page passes as ``current`` to mark its tab
    label: str
    url_name: str  # a URL that takes the project ``slug``
    capability: str  # one of CAPABILITIES' values: "view", "annotate", "manage"
    order: int


_TABS: dict[str, ProjectTab] = {}


def project_tab_register(*, key: str, label: str, url_name: str, capability: str, order: int) -> None:
    """Add a tab; registering a key again replaces its tab (so a repeated ``ready()`` is harmless)."""
    if not any(capability in caps for caps in CAPABILITIES.values()):
        raise ValueError(f"unknown capability {capability!r} for the project tab {key!r}")
    _TABS[key] = ProjectTab(key=key, label=label, url_name=url_name, capability=capability, order=order)


def project_tabs_for(*, project: Project, role: str | None, current: str = "") -> list[dict]:
    """The tabs ``role`` may see, in order, as the template renders them."""
    allowed = CAPABILITIES.get(role, ())
    tabs = []
    for tab in sorted(_TABS.values(), key=lambda t: (t.order, t.key)):
        if tab.capability not in allowed:
            continue
        try:
            url = reverse(tab.url_name, kwargs={"slug": project.slug})
        except NoReverseMatch:  # an area whose pages are not installed in this build
            continue
        tabs.append({"key": tab.key, "label": tab.label, "url": url, "current": tab.key == current})
    return tabs
