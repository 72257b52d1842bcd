"""API routes of live traces (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from traces.live import api

urlpatterns = [
    path("projects/<slug:slug>/live/", api.LiveApi.as_view(), name="api-live"),
    path("projects/<slug:slug>/live/flush/", api.LiveFlushApi.as_view(), name="api-live-flush"),
    path("projects/<slug:slug>/ingest-keys/", api.IngestKeysApi.as_view(), name="api-ingest-keys"),
    path("projects/<slug:slug>/ingest-keys/<int:pk>/revoke/", api.IngestKeyRevokeApi.as_view(),
         name="api-ingest-key-revoke"),  # fmt: skip
]
