"""API routes of analytics (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.analytics.views import paper as paper_views

urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/framework-modes/",
        paper_views.FrameworkModesApi.as_view(),
        name="api-analytics-framework-modes",
    ),
]
