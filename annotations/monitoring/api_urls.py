"""API routes of monitoring and alerts (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.monitoring import api

urlpatterns = [
    path("projects/<slug:slug>/monitoring/", api.MonitoringSeriesApi.as_view(), name="api-monitoring"),
    path("projects/<slug:slug>/alert-rules/", api.AlertRulesApi.as_view(), name="api-alert-rules"),
    path("projects/<slug:slug>/alert-events/", api.AlertEventsApi.as_view(), name="api-alert-events"),
    path("projects/<slug:slug>/webhooks/", api.WebhooksApi.as_view(), name="api-webhooks"),
    path("projects/<slug:slug>/webhooks/<int:pk>/", api.WebhookDetailApi.as_view(), name="api-webhook"),
]
