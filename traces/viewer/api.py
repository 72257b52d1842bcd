"""Trace list and viewer API: list, detail, a window of steps, raw text, search inside a trace."""

from django.core.paginator import Paginator
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.pagination import StrictPageNumberPagination
from traces.projects.permissions import ProjectScopedMixin
from traces.viewer.search import search_first_hit, search_hit_window, trace_search
from traces.viewer.selectors import (
    CappedCountPaginator,
    TraceFilters,
    outline_json,
    trace_agent_hues,
    trace_get,
    trace_list_for_user,
    trace_outline,
    trace_outline_version,
    trace_raw_text,
    trace_rows_mark_labelled,
    trace_steps_window,
)
from traces.viewer.serializers import (
    OutlineOut,
    SearchIn,
    SearchOut,
    StepsWindowIn,
    StepsWindowOut,
    TraceDetailOut,
    TraceListIn,
    TraceListOut,
)


class TracePagination(StrictPageNumberPagination):
    """50 per page; with a free-text search the count stops at 1,000 (``count_capped`` says so)."""

    def paginate_queryset(self, queryset, request, view=None):
        self.django_paginator_class = CappedCountPaginator if request.query_params.get("q") else Paginator
        return super().paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data):
        response = super().get_paginated_response(data)
        response.data["count_capped"] = bool(getattr(self.page.paginator, "count_capped", False))
        return response

    def get_paginated_response_schema(self, schema):
        schema = super().get_paginated_response_schema(schema)
        schema["properties"]["count_capped"] = {"type": "boolean", "description": "count stopped at 1,000"}
        return schema


class TraceListApi(ProjectScopedMixin, generics.ListAPIView):
    """Traces of a project, filtered, searched and sorted; 50 per page; never the raw text."""

    serializer_class = TraceListOut
    pagination_class = TracePagination

    @extend_schema(parameters=[TraceListIn])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        return trace_rows_mark_labelled(user=self.request.user, project=self.project, rows=page)

    def get_queryset(self):
        query = TraceListIn(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        filters = TraceFilters.from_query(query.validated_data)
        return trace_list_for_user(user=self.request.user, project=self.project, filters=filters)


class TraceDetailApi(ProjectScopedMixin, generics.RetrieveAPIView):
    """A trace's metadata and statistics (the raw text is at .../raw/)."""

    serializer_class = TraceDetailOut

    def get_object(self):
        return trace_get(project=self.project, pk=self.kwargs["pk"])


class TraceStepsApi(ProjectScopedMixin, APIView):
    """A window of steps: ``limit`` steps from index ``start`` (at most 200)."""

    @extend_schema(parameters=[StepsWindowIn], responses=StepsWindowOut)
    def get(self, request, slug, pk):
        query = StepsWindowIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        trace = trace_get(project=self.project, pk=pk)
        steps = trace_steps_window(trace=trace, **query.validated_data)
        next_start = steps[-1].index + 1 if steps and steps[-1].index + 1 < trace.n_steps else None
        data = {
            "start": query.validated_data["start"],
            "total": trace.n_steps,
            "next_start": next_start,
            "steps": steps,
        }
        return Response(StepsWindowOut(data, context={"hues": trace_agent_hues(trace=trace)}).data)


class TraceRawApi(ProjectScopedMixin, APIView):
    """The raw text exactly as imported, as text/plain (never rendered as HTML)."""

    @extend_schema(responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request, slug, pk):
        text = trace_raw_text(project=self.project, pk=pk)
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Disposition"] = f'inline; filename="trace-{pk}.txt"'
        return response


class TraceSearchApi(ProjectScopedMixin, APIView):
    """Every case-insensitive occurrence of ``q`` in the trace's steps: step index, line, snippet.

    With ``around`` (the reader's step) the answer also carries the window of steps that shows the
    first hit at or after it, so the viewer shows that hit without a second request."""

    @extend_schema(parameters=[SearchIn], responses=SearchOut)
    def get(self, request, slug, pk):
        query = SearchIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        trace = trace_get(project=self.project, pk=pk)
        result = trace_search(trace=trace, q=query.validated_data["q"])
        data = {"q": result.q, "count": result.count, "truncated": result.truncated, "hits": result.hits}
        around = query.validated_data.get("around")
        if around is not None and result.hits:
            data["window"] = {
                "hit": search_first_hit(result=result, around=around),
                "steps": search_hit_window(trace=trace, result=result, around=around),
            }
        return Response(SearchOut(data, context={"hues": trace_agent_hues(trace=trace)}).data)


class TraceOutlineApi(ProjectScopedMixin, APIView):
    """Every step's agent, kind and line range (no content): the viewer's map of the trace.

    With ``?v=`` equal to the trace's outline version (the viewer's data-outline-url carries it)
    the answer may be kept by the browser for a day: the outline changes only with the trace's
    content or steps, and then the version changes too. ``private``: never in a shared cache.
    """

    @extend_schema(
        parameters=[OpenApiParameter("v", str, description="outline version; when current, the answer is cacheable")],
        responses=OutlineOut,
    )
    def get(self, request, slug, pk):
        trace = trace_get(project=self.project, pk=pk)
        response = Response(outline_json(trace=trace, outline=trace_outline(trace=trace)))
        if request.query_params.get("v") == trace_outline_version(trace=trace):
            response["Cache-Control"] = "private, max-age=86400, immutable"
        return response
