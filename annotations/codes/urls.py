"""HTML routes of the open-codes page (namespace "annotations")."""

from django.urls import path

from annotations.codes import views

C = "p/<slug:slug>/codes/<int:pk>/"

urlpatterns = [
    path("p/<slug:slug>/codes/", views.code_list, name="code_list"),
    path(C, views.code_detail, name="code_detail"),
    path(C + "rename/", views.code_rename, name="code_rename"),
    path(C + "merge/", views.code_merge, name="code_merge"),
    path(C + "promote/", views.code_promote, name="code_promote"),
]
