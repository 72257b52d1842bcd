"""API routes of the annotation workspace (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.labels import api as views

T = "projects/<slug:slug>/traces/<int:pk>/"

urlpatterns = [
    path("queue/", views.QueueApi.as_view(), name="api-queue"),
    path(T + "annotation/", views.MyAnnotationApi.as_view(), name="api-my-annotation"),
    path(T + "annotation/submit/", views.SubmitApi.as_view(), name="api-my-annotation-submit"),
    path(T + "annotation/reopen/", views.ReopenApi.as_view(), name="api-my-annotation-reopen"),
    path(T + "annotation/history/", views.HistoryApi.as_view(), name="api-my-annotation-history"),
    path(T + "annotations/", views.VisibleAnnotationListApi.as_view(), name="api-trace-annotations"),
    path("projects/<slug:slug>/open-codes/", views.OpenCodeListApi.as_view(), name="api-open-codes"),
]
