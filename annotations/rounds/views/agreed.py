"""The agreed-labels page: the project's agreed labels (``agreed_labels_on_version``) on a target
version, trace by mode, with where the labels came from and what the mapping could not decide.

GET p/<slug>/agreed/[?version=<id>&round=<id>&page=]

The same labels as ``GET /api/projects/<slug>/agreed-labels/?target_version=``, for every member,
except that traces now in a draft or open round (``blind_trace_ids``: for a manager, only the
rounds she labels in) are left out and counted as left out: the page never shows an earlier
consensus beside a trace that is being labelled blind again.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotations.labels.visibility import blind_trace_ids
from annotations.models import Round
from annotations.rounds.agreed import agreed_adjudications, agreed_labels_on_version
from annotations.rounds.targets import target_version_choices, target_version_resolve
from taxonomy.selectors import version_modes
from traces.models import Trace
from traces.projects.selectors import project_get_for_user

PER_PAGE = 50
BASIS_TITLE = {
    "unanimous": "unanimous",
    "adjudicated": "adjudicated",
    "majority": "majority vote",
    "mapped": "carried from another version's code",
}


@login_required
@require_GET
def agreed_labels_page(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    choices = list(target_version_choices(project=project))
    try:
        target = target_version_resolve(project=project, raw=request.GET.get("version"))
    except ValueError:
        target = project.taxonomy_version  # forgiving, like the dashboard: the working version
    if target is not None and target.pk not in {v.pk for v in choices}:
        target = project.taxonomy_version
    rounds = list(Round.objects.filter(project=project, state=Round.State.CLOSED).order_by("closed_at", "id"))
    rnd = next((r for r in rounds if str(r.pk) == request.GET.get("round", "")), None)
    context = {"project": project, "role": role, "nav": "projects", "target_choices": choices, "target": target}
    context |= {"rounds": rounds, "round": rnd}
    if target is None:
        return render(request, "annotations/rounds/agreed.html", context)
    adjudications = agreed_adjudications(project=project, round=rnd)
    blind = blind_trace_ids(user=request.user, project=project)
    n_withheld = adjudications.filter(trace_id__in=blind).values("trace_id").distinct().count()
    shown = None  # every trace, unless some are withheld
    if n_withheld:
        shown = list(adjudications.exclude(trace_id__in=blind).values_list("trace_id", flat=True).distinct())
    agreed = agreed_labels_on_version(project=project, target=target, round=rnd, trace_ids=shown)
    modes = version_modes(version=target)
    trace_ids = sorted(set(agreed.labels) | set(agreed.unknown))
    page = Paginator(trace_ids, PER_PAGE).get_page(request.GET.get("page"))
    traces = Trace.objects.filter(pk__in=list(page.object_list)).only("id", "title", "external_id", "mas_name")
    by_id = {t.pk: t for t in traces}
    rows = []
    for tid in page.object_list:
        labels, basis, unknown = agreed.labels.get(tid, {}), agreed.basis.get(tid, {}), set(agreed.unknown.get(tid, ()))
        cells = []
        for m in modes:
            if m.code in labels:
                b = basis.get(m.code, "")
                cells.append(
                    {"value": "present" if labels[m.code] else "absent", "basis": b, "title": BASIS_TITLE.get(b, b)}
                )
            elif m.code in unknown:
                cells.append({"value": "unknown", "basis": "", "title": "the mapping cannot decide this value"})
            else:
                cells.append({"value": "", "basis": "", "title": "no label"})
        rows.append({"trace": by_id.get(tid), "trace_id": tid, "cells": cells})
    present = {m.code: 0 for m in modes}
    for labels in agreed.labels.values():
        for code, v in labels.items():
            if v and code in present:
                present[code] += 1
    query = request.GET.copy()
    query.pop("page", None)
    context |= {
        "agreed": agreed,
        "modes": modes,
        "totals": [present[m.code] for m in modes],
        "rows": rows,
        "page": page,
        "n_traces": len(trace_ids),
        "n_labels": sum(len(v) for v in agreed.labels.values()),
        "n_withheld": n_withheld,
        "mapping_url": reverse("taxonomy:mappings"),
        "api_url": reverse("api-agreed-labels", kwargs={"slug": project.slug}) + f"?target_version={target.pk}",
        "query": query.urlencode(),
    }
    return render(request, "annotations/rounds/agreed.html", context)
