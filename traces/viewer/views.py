"""The trace list, the trace page and the raw-text view (HTML). Reads live in trace_selectors."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from traces.projects.selectors import project_get_for_user
from traces.viewer.selectors import (
    SORTS,
    TraceFilters,
    raw_page_start,
    trace_filter_choices,
    trace_get,
    trace_list_for_user,
    trace_paginator,
    trace_raw_lines,
    trace_rows_mark_labelled,
    trace_viewer_context,
)

SORT_LABELS = {
    "newest": "Newest",
    "oldest": "Oldest",
    "size": "Largest",
    "steps": "Most steps",
    "agents": "Most agents",
    "framework": "Framework",
}


@login_required
def trace_list(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    filters = TraceFilters.from_query(request.GET)
    qs = trace_list_for_user(user=request.user, project=project, filters=filters)
    page = trace_paginator(qs=qs, filters=filters).get_page(request.GET.get("page"))
    return render(
        request,
        "traces/viewer/list.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "tab": "traces",
            "page_obj": page,
            "traces": trace_rows_mark_labelled(user=request.user, project=project, rows=page.object_list),
            "filters": filters,
            "choices": trace_filter_choices(project=project),
            "sorts": [(key, SORT_LABELS[key]) for key in SORTS],
            "querystring_prefix": (filters.querystring() + "&") if filters.querystring() else "",
            "sort_links": {key: "?" + filters.querystring(sort=key) for key in SORTS},
        },
    )


@login_required
def trace_detail(request, slug, pk):
    project, role = project_get_for_user(user=request.user, slug=slug)
    trace = trace_get(project=project, pk=pk)
    return render(
        request,
        "traces/viewer/detail.html",
        {"project": project, "role": role, "nav": "projects", "tab": "traces", **trace_viewer_context(trace=trace)},
    )


@login_required
def trace_raw(request, slug, pk):
    project, role = project_get_for_user(user=request.user, slug=slug)
    trace = trace_get(project=project, pk=pk)
    line = request.GET.get("line", "")
    if line.isdigit():  # "go to line": the page holding it, scrolled to it
        return redirect(f"{request.path}?start={raw_page_start(line=int(line))}#L{int(line)}")
    start = request.GET.get("start", "")
    window = trace_raw_lines(trace=trace, start=int(start) if start.isdigit() else 1)
    return render(
        request,
        "traces/viewer/raw.html",
        {"project": project, "role": role, "nav": "projects", "tab": "traces", "trace": trace, "window": window},
    )
