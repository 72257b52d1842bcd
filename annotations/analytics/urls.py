"""HTML routes of the analytics dashboard (namespace "annotations")."""

from django.urls import path

from annotations.analytics import attribution
from annotations.analytics.views import dashboard as views
from annotations.analytics.views import paper as paper_views

urlpatterns = [
    path("p/<slug:slug>/analytics/", views.dashboard, name="dashboard"),
    path("p/<slug:slug>/analytics/failures-start/", attribution.failures_start, name="failures_start"),
    path("p/<slug:slug>/analytics/frameworks/", paper_views.framework_modes_page, name="framework_modes"),
]
