"""HTML routes of the annotations app, one module per area so each can grow on its own."""

from django.urls import include, path

app_name = "annotations"

urlpatterns = [
    path("", include("annotations.labels.urls")),
    path("", include("annotations.rounds.urls")),
    path("", include("annotations.judge.urls")),
    path("", include("annotations.releases.urls")),
    path("", include("annotations.analytics.urls")),
    path("", include("annotations.experiments.urls")),
    path("", include("annotations.monitoring.urls")),
    path("", include("annotations.codes.urls")),
    path("", include("annotations.corpus.urls")),
]
