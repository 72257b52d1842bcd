"""API routes of the trace viewer: traces, steps, outline, raw text, search."""

from django.urls import path

from traces.viewer import api as viewer_views

urlpatterns = [
    path("projects/<slug:slug>/traces/", viewer_views.TraceListApi.as_view(), name="api-trace-list"),
    path("projects/<slug:slug>/traces/<int:pk>/", viewer_views.TraceDetailApi.as_view(), name="api-trace-detail"),
    path("projects/<slug:slug>/traces/<int:pk>/steps/", viewer_views.TraceStepsApi.as_view(), name="api-trace-steps"),
    path(
        "projects/<slug:slug>/traces/<int:pk>/outline/",
        viewer_views.TraceOutlineApi.as_view(),
        name="api-trace-outline",
    ),
    path("projects/<slug:slug>/traces/<int:pk>/raw/", viewer_views.TraceRawApi.as_view(), name="api-trace-raw"),
    path(
        "projects/<slug:slug>/traces/<int:pk>/search/", viewer_views.TraceSearchApi.as_view(), name="api-trace-search"
    ),
]
