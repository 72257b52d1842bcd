"""Pages of the trace viewer."""

from django.urls import path

from traces.viewer import views as viewer_views

urlpatterns = [
    path("p/<slug:slug>/traces/", viewer_views.trace_list, name="trace_list"),
    path("p/<slug:slug>/traces/<int:pk>/", viewer_views.trace_detail, name="trace_detail"),
    path("p/<slug:slug>/traces/<int:pk>/raw/", viewer_views.trace_raw, name="trace_raw"),
]
