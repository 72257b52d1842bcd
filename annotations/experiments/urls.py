"""HTML routes of experiments (namespace "annotations")."""

from django.urls import path

from annotations.experiments import views

urlpatterns = [
    path("p/<slug:slug>/analytics/experiment/", views.experiment_page, name="experiment"),
]
