"""HTML routes of the annotations app, one module per area so each can grow on its own."""

from django.urls import include, path

app_name = "annotations"

urlpatterns = [
    path("", include("annotations.web.workspace_urls")),
    path("", include("annotations.web.rounds_urls")),
    path("", include("annotations.web.judge_urls")),
    path("", include("annotations.web.releases_urls")),
]
