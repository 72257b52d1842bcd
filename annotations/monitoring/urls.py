"""HTML routes of monitoring and alerts (namespace "annotations")."""

from django.urls import path

from annotations.monitoring import views

urlpatterns = [
    path("p/<slug:slug>/analytics/monitoring/", views.monitoring_page, name="monitoring"),
    path("p/<slug:slug>/analytics/alerts/", views.alerts_page, name="alerts"),
]
