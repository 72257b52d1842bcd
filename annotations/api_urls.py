"""API routes of the annotations app, one module per area."""

from django.urls import include, path

urlpatterns = [
    path("", include("annotations.labels.api_urls")),
    path("", include("annotations.rounds.api_urls")),
    path("", include("annotations.judge.api_urls")),
    path("", include("annotations.releases.api_urls")),
    path("", include("annotations.analytics.api_urls")),
    path("", include("annotations.experiments.api_urls")),
    path("", include("annotations.monitoring.api_urls")),
    path("", include("annotations.corpus.api_urls")),
]
