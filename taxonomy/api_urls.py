"""API routes of the taxonomy app (mounted under /api/)."""

from django.urls import path

from taxonomy import api as views

urlpatterns = [
    path("taxonomy-versions/", views.VersionListApi.as_view(), name="api-taxonomy-version-list"),
    path("taxonomy-versions/<int:pk>/", views.VersionDetailApi.as_view(), name="api-taxonomy-version-detail"),
]
