"""Pages of releases: the Releases tab, a release, its download."""

from django.urls import path

from annotations.releases import views as releases

urlpatterns = [
    path("p/<slug:slug>/releases/", releases.release_list_page, name="release_list"),
    path("p/<slug:slug>/releases/policy/", releases.release_policy, name="release_policy"),
    path("p/<slug:slug>/releases/<int:number>/progress/", releases.release_progress, name="release_progress"),
    path("p/<slug:slug>/releases/<int:number>/retry/", releases.release_retry_page, name="release_retry"),
    path("p/<slug:slug>/releases/<int:number>/download/", releases.release_download, name="release_download"),
    path("p/<slug:slug>/releases/<int:number>/files/<str:name>", releases.release_file, name="release_file"),
]
