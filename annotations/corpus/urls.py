"""HTML routes of corpus search (namespace "annotations")."""

from django.urls import path

from annotations.corpus import views

urlpatterns = [
    path("p/<slug:slug>/search/", views.search_page, name="corpus_search"),
    path("p/<slug:slug>/search/behaviour/<int:pk>/", views.behaviour_page, name="behaviour_search"),
]
