"""The paper table (framework x mode) as a page, as downloads (CSV, LaTeX, SVG) and as JSON.

All three read one selection (``paper_selection``: label source and trace filters, parsed like the
dashboard's) and one table (``paper.framework_mode_table``), so the page, the files and the API
carry the same numbers. The label matrix is cached under the dashboard's key (its fingerprint
changes with any label, trace or visibility change, so a hit is never stale).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.analytics import paper
from annotations.analytics.selectors import (
    AGREED,
    FILTER_FIELDS,
    dashboard_sources,
    label_matrix_cached,
)
from traces.api_errors import QueryParamError
from traces.projects.permissions import ProjectScopedMixin
from traces.projects.selectors import project_get_for_user

MEASURES = {"traces": "Share of the framework's traces", "labels": "Share of the framework's failure labels"}
CI_METHODS = {
    "share_traces": "Wilson score interval, 95%, traces as the independent units",
    "share_labels": "linearised ratio estimator, 95%, traces as clusters (a trace's labels are not independent)",
}


@dataclass
class Selection:
    source: str
    source_label: str
    filters: dict
    codes: list[str]
    names: dict[str, str]
    rows: list[paper.Row]
    n_mapped: int
    sources: list[tuple[str, str]]


def paper_selection(*, user, project, params, strict: bool = False) -> Selection:
    """The label source (``rater``) and filters (``mas_name``, ``llm_name``, ``benchmark``) of
    ``params``. A source the user may not see falls back to agreed labels on pages; with
    ``strict`` (the API) it is a 400 naming the parameter."""
    filters = {k: [v for v in params.getlist(k) if v] for k in FILTER_FIELDS}
    filters = {k: v for k, v in filters.items() if v}
    source = params.get("rater") or AGREED
    sources = dashboard_sources(user=user, project=project)
    if source not in {s for s, _ in sources}:
        if strict:
            raise QueryParamError("rater", f"no rater {source[:40]!r} you may see; use 'agreed' or a rater id")
        source = AGREED
    M = label_matrix_cached(user=user, project=project, source=source, filters=filters)
    rows = paper.framework_mode_table(M.X, M.mas_name)
    return Selection(source, M.source_label, filters, M.codes, M.names, rows, M.n_mapped, sources)


def _download(body: str, content_type: str, filename: str) -> HttpResponse:
    resp = HttpResponse(body, content_type=content_type)
    resp["Content-Disposition"] = f'attachment; filename="{filename}"'
    return resp


def _cell(framework: str, c: paper.Cell, traces: bool) -> dict:
    """One page cell; numbers formatted here (Django's floatformat costs ~0.5 ms a call)."""
    share = c.share_traces if traces else c.share_labels
    low, high = (c.traces_low, c.traces_high) if traces else (c.labels_low, c.labels_high)
    defined = share is not None and share == share  # not NaN
    return {
        "framework": framework,
        "count": c.count,
        "share": share if defined else None,
        "low": low,
        "high": high,
        "share_text": f"{share:.3f}" if defined else "–",
        "share_exact": f"{share:.6f}" if defined else "",
        "ci_text": f"[{low:.3f}, {high:.3f}]" if defined and low is not None else "",
    }


@login_required
@require_GET
def framework_modes_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    sel = paper_selection(user=request.user, project=project, params=request.GET)
    measure = request.GET.get("measure", "traces")
    if measure not in MEASURES:
        measure = "traces"
    fmt = request.GET.get("format")
    stem = f"{project.slug}-framework-modes-{measure}"
    if fmt == "csv":
        return _download(paper.to_csv(sel.rows, sel.codes, sel.names), "text/csv; charset=utf-8", f"{stem}.csv")
    if fmt == "tex":
        body = paper.to_latex(sel.rows, sel.codes, sel.names, measure=measure)
        return _download(body, "application/x-tex; charset=utf-8", f"{stem}.tex")
    if fmt == "svg":
        return _download(
            paper.to_svg(sel.rows, sel.codes, measure=measure), "image/svg+xml; charset=utf-8", f"{stem}.svg"
        )
    query = request.GET.copy()
    for k in ("format", "measure"):
        query.pop(k, None)
    traces = measure == "traces"
    # Modes down, frameworks across (as in the LaTeX table); "All frameworks" is the last column.
    mode_rows = [
        {
            "code": code,
            "name": sel.names.get(code, ""),
            "cells": [_cell(row.framework, row.cells[m], traces) for row in sel.rows],
        }
        for m, code in enumerate(sel.codes)
    ]
    return render(
        request,
        "annotations/analytics/framework_modes.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "sel": sel,
            "mode_rows": mode_rows,
            "measure": measure,
            "measures": MEASURES,
            "ci_method": CI_METHODS["share_traces" if measure == "traces" else "share_labels"],
            "sources": sel.sources,
            "query": query.urlencode(),
            # Built by paper.to_svg, which escapes every piece of text it places.
            "svg": mark_safe(paper.to_svg(sel.rows, sel.codes, measure=measure)),  # noqa: S308
        },
    )


class _CellOut(serializers.Serializer):
    framework = serializers.CharField()
    mode = serializers.CharField()
    mode_name = serializers.CharField()
    n_traces = serializers.IntegerField()
    count = serializers.IntegerField(help_text="Traces of the framework with the mode present.")
    share_traces = serializers.FloatField(allow_null=True, help_text="count / n_traces.")
    share_traces_ci = serializers.ListField(child=serializers.FloatField(allow_null=True), help_text="Wilson 95%.")
    share_labels = serializers.FloatField(
        allow_null=True, help_text="count / present labels of the framework (null when it has none)."
    )
    share_labels_ci = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="95%, linearised ratio estimator, traces as clusters."
    )


class FrameworkModesOut(serializers.Serializer):
    source = serializers.CharField(help_text='"agreed" or a rater id.')
    source_label = serializers.CharField()
    filters = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
    frameworks = serializers.ListField(child=serializers.CharField(), help_text='Ends with "All frameworks".')
    ci_methods = serializers.DictField(child=serializers.CharField())
    rows = _CellOut(many=True)


class FrameworkModesApi(ProjectScopedMixin, APIView):
    """The framework x mode table of the analytics page (counts, shares per trace and per
    framework, 95% CIs), one row per (framework, mode); the same numbers as the page's downloads."""

    @extend_schema(
        parameters=[
            OpenApiParameter("rater", str, description='"agreed" (default) or the id of a rater you may see.'),
            *(
                OpenApiParameter(k, str, many=True, description=f"Only traces with this {k} (repeatable).")
                for k in FILTER_FIELDS
            ),
        ],
        responses={200: FrameworkModesOut},
    )
    def get(self, request, slug):
        sel = paper_selection(user=request.user, project=self.project, params=request.query_params, strict=True)
        return Response(
            {
                "source": sel.source,
                "source_label": sel.source_label,
                "filters": sel.filters,
                "frameworks": [r.framework for r in sel.rows],
                "ci_methods": CI_METHODS,
                "rows": paper.rows_as_dicts(sel.rows, sel.codes, sel.names),
            }
        )
