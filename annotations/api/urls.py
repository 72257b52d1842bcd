"""API routes of the annotations app, one module per area."""

from django.urls import include, path

urlpatterns = [
    path("", include("annotations.api.workspace_urls")),
    path("", include("annotations.api.rounds_urls")),
    path("", include("annotations.api.judge_urls")),
    path("", include("annotations.api.releases_urls")),
]
