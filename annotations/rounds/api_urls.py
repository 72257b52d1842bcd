"""API routes of calibration rounds (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.rounds import api as views

R = "rounds/<int:pk>/"

urlpatterns = [
    path("projects/<slug:slug>/rounds/", views.RoundListApi.as_view(), name="api-round-list"),
    path("projects/<slug:slug>/rounds/preview/", views.RoundSamplePreviewApi.as_view(), name="api-round-preview"),
    path("projects/<slug:slug>/agreed-labels/", views.AgreedLabelListApi.as_view(), name="api-agreed-labels"),
    path(R, views.RoundDetailApi.as_view(), name="api-round-detail"),
    path(R + "transition/", views.RoundTransitionApi.as_view(), name="api-round-transition"),
    path(R + "assignments/", views.AssignmentListApi.as_view(), name="api-round-assignments"),
    path(R + "disagreements/", views.DisagreementListApi.as_view(), name="api-round-disagreements"),
    path(R + "adjudications/", views.AdjudicationListApi.as_view(), name="api-round-adjudications"),
    path(R + "comments/", views.CommentListApi.as_view(), name="api-round-comments"),
    path(R + "agreement/", views.AgreementApi.as_view(), name="api-round-agreement"),
]
