"""API routes of releases: create, list, read, retry, download."""

from django.urls import path

from annotations.releases import api as releases

urlpatterns = [
    path("projects/<slug:slug>/releases/", releases.ReleaseListApi.as_view(), name="api-release-list"),
    path("projects/<slug:slug>/releases/<int:number>/", releases.ReleaseDetailApi.as_view(), name="api-release-detail"),
    path(
        "projects/<slug:slug>/releases/<int:number>/retry/",
        releases.ReleaseRetryApi.as_view(),
        name="api-release-retry",
    ),
    path(
        "projects/<slug:slug>/releases/<int:number>/download/",
        releases.ReleaseDownloadApi.as_view(),
        name="api-release-download",
    ),
]
