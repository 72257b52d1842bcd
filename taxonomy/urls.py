"""Pages of the taxonomy app: versions, drafts, mappings."""

from django.urls import path

from taxonomy import views

app_name = "taxonomy"

urlpatterns = [
    path("", views.taxonomy_list_page, name="list"),
    path("import/", views.version_import_page, name="import"),
    path("mappings/", views.mapping_page, name="mappings"),
    path("<slug:slug>/v<int:number>/", views.version_page, name="version"),
    path("<slug:slug>/v<int:number>/export.json", views.version_export_json, name="export"),
    path("<slug:slug>/v<int:number>/draft/", views.version_draft_page, name="draft"),
    path("<slug:slug>/v<int:number>/publish/", views.version_publish_page, name="publish"),
    path("<slug:slug>/v<int:number>/modes/<str:code>/edit/", views.mode_edit_page, name="mode_edit"),
    path("<slug:slug>/v<int:number>/categories/<str:code>/edit/", views.category_edit_page, name="category_edit"),
    path("<slug:slug>/v<int:number>/change/", views.version_change_page, name="change"),
    path("<slug:slug>/diff/", views.version_diff_page, name="diff"),
]
