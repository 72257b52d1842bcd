"""HTML routes of the annotation workspace (namespace "annotations")."""

from django.urls import path

from annotations.labels import views

urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("queue/next/", views.queue_next_page, name="queue_next"),
    path("p/<slug:slug>/queue/", views.project_queue, name="project_queue"),
    path("p/<slug:slug>/traces/<int:pk>/label/", views.workspace, name="workspace"),
]
