"""API routes of corpus search (documented in the OpenAPI schema at /api/schema/)."""

from django.urls import path

from annotations.corpus import api

P = "projects/<slug:slug>/"

urlpatterns = [
    path(P + "search/", api.CorpusSearchApi.as_view(), name="api-corpus-search"),
    path(P + "search/actions/", api.SearchActionsApi.as_view(), name="api-search-actions"),
    path(P + "search/actions/<int:pk>/undo/", api.SearchActionUndoApi.as_view(), name="api-search-action-undo"),
    path(P + "behaviour-searches/", api.BehaviourSearchesApi.as_view(), name="api-behaviour-searches"),
    path(P + "behaviour-searches/<int:pk>/", api.BehaviourSearchApi.as_view(), name="api-behaviour-search"),
    path(P + "behaviour-searches/<int:pk>/cancel/", api.BehaviourCancelApi.as_view(), name="api-behaviour-cancel"),
    path(
        P + "behaviour-searches/<int:pk>/groups/<int:number>/",
        api.BehaviourGroupApi.as_view(),
        name="api-behaviour-group",
    ),  # fmt: skip
]
