"""HTML routes of the analytics dashboard (namespace "annotations")."""

from django.urls import path

from annotations.analytics import views

urlpatterns = [
    path("p/<slug:slug>/analytics/", views.dashboard, name="dashboard"),
]
