"""API routes of experiments (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.experiments import api

urlpatterns = [
    path(
        "projects/<slug:slug>/experiments/compare/",
        api.ExperimentCompareApi.as_view(),
        name="api-experiment-compare",
    ),
]
