"""HTML routes of the analytics dashboard (namespace "annotations")."""

from django.urls import path

from annotations.analytics import attribution, views

urlpatterns = [
    path("p/<slug:slug>/analytics/", views.dashboard, name="dashboard"),
    path("p/<slug:slug>/analytics/failures-start/", attribution.failures_start, name="failures_start"),
]
