from django.urls import include, path

from . import views

urlpatterns = [
    path("projects/", views.ProjectListApi.as_view(), name="api-project-list"),
    path("projects/<slug:slug>/", views.ProjectDetailApi.as_view(), name="api-project-detail"),
    path("projects/<slug:slug>/members/", views.MemberListApi.as_view(), name="api-project-members"),
    path("", include("traces.api.viewer_urls")),
    path("", include("traces.api.import_urls")),
]
