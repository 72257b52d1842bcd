"""Pages of imports: the Import tab and a job's report."""

from django.urls import path

from traces.importing import views as import_views

urlpatterns = [
    path("p/<slug:slug>/import/", import_views.import_page, name="import_page"),
    path("p/<slug:slug>/import/<int:pk>/", import_views.import_job_detail, name="import_job_detail"),
    path(
        "p/<slug:slug>/import/<int:pk>/progress/",
        import_views.import_job_progress_partial,
        name="import_job_progress",
    ),
    path("p/<slug:slug>/import/<int:pk>/retry/", import_views.import_job_retry_page, name="import_job_retry"),
]
