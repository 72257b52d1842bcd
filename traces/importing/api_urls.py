"""API routes of imports."""

from django.urls import path

from traces.importing import api as import_views

urlpatterns = [
    path("projects/<slug:slug>/imports/", import_views.ImportJobListApi.as_view(), name="api-import-list"),
    path("projects/<slug:slug>/imports/<int:pk>/", import_views.ImportJobDetailApi.as_view(), name="api-import-detail"),
    path(
        "projects/<slug:slug>/imports/<int:pk>/retry/",
        import_views.ImportJobRetryApi.as_view(),
        name="api-import-retry",
    ),
]
