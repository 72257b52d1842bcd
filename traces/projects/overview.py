"""The numbers on a project's overview page, and the status panels other apps add to it.

``project_status_register(key=, fn=, template=, order=)`` in an app's ``ready()``: ``fn(*, project,
user, role) -> dict | None`` gives the panel's context (None hides it), ``template`` renders it.
The annotations app registers "where the work stands" (rounds, kappa, progress, judge runs,
latest release, next step), which traces cannot compute itself (traces <- annotations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Count, Sum

from traces.models import Project


@dataclass(frozen=True)
class StatusPanel:
    key: str
    fn: Callable[..., dict | None]
    template: str
    order: int


_PANELS: dict[str, StatusPanel] = {}


def project_status_register(*, key: str, fn: Callable[..., dict | None], template: str, order: int) -> None:
    _PANELS[key] = StatusPanel(key=key, fn=fn, template=template, order=order)


def project_status_panels(*, project: Project, user, role: str) -> list[dict]:
    out = []
    for panel in sorted(_PANELS.values(), key=lambda p: (p.order, p.key)):
        data = panel.fn(project=project, user=user, role=role)
        if data is not None:
            out.append({"key": panel.key, "template": panel.template, "data": data})
    return out


def project_overview(*, project: Project) -> dict:
    traces = project.traces.all()
    totals = traces.aggregate(n=Count("id"), size=Sum("size_bytes"), steps=Sum("n_steps"))
    by_framework = traces.values("mas_name").annotate(n=Count("id"), steps=Sum("n_steps")).order_by("-n", "mas_name")
    return {
        "totals": totals,
        "by_framework": list(by_framework),
        "recent_imports": list(project.import_jobs.select_related("created_by")[:5]),
    }
