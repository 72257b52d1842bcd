"""API routes of the traces app: projects, imports, the viewer (mounted under /api/)."""

from django.urls import include, path

from traces.projects import api as views

urlpatterns = [
    path("projects/", views.ProjectListApi.as_view(), name="api-project-list"),
    path("projects/<slug:slug>/", views.ProjectDetailApi.as_view(), name="api-project-detail"),
    path("projects/<slug:slug>/members/", views.MemberListApi.as_view(), name="api-project-members"),
    path("", include("traces.viewer.api_urls")),
    path("", include("traces.importing.api_urls")),
    path("", include("traces.live.api_urls")),
]
