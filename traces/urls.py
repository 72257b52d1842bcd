"""Pages of the traces app: home, profile, projects (new, home, members, settings), the viewer, imports."""

from django.urls import include, path

from traces.live import views as live_views
from traces.projects import views

urlpatterns = [
    path("", views.home, name="home"),
    path("profile/", views.profile, name="profile"),
    path("projects/new/", views.project_new, name="project_new"),
    path("p/<slug:slug>/", views.project_detail, name="project_detail"),
    path("p/<slug:slug>/members/", views.project_members_page, name="project_members"),
    path("p/<slug:slug>/settings/", views.project_settings_page, name="project_settings"),
    path("p/<slug:slug>/settings/working-version/", views.project_working_version_page, name="project_working_version"),
    path("p/<slug:slug>/settings/live/", live_views.live_page, name="live"),
    path("", include("traces.viewer.urls")),
    path("", include("traces.importing.urls")),
]
