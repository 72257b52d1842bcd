"""HTML routes of calibration rounds (namespace "annotations")."""

from django.urls import path

from annotations.rounds.views import agreed as agreed_views
from annotations.rounds.views import attribution as attribution_views
from annotations.rounds.views import disagreements as disagreement_views
from annotations.rounds.views import rounds as views

R = "p/<slug:slug>/rounds/<int:pk>/"
D = R + "disagreements/<int:trace_id>/<str:code>/"

urlpatterns = [
    path("p/<slug:slug>/rounds/", views.round_list, name="round_list"),
    path("p/<slug:slug>/rounds/new/", views.round_new, name="round_new"),
    path("p/<slug:slug>/agreed/", agreed_views.agreed_labels_page, name="agreed_labels"),
    path("p/<slug:slug>/rounds/preview/", views.round_preview, name="round_preview"),
    path(R, views.round_detail, name="round_detail"),
    path(R + "report/", views.round_report_page, name="round_report"),
    path(R + "disagreements/", disagreement_views.round_disagreements_page, name="round_disagreements"),
    path(D + "adjudicate/", disagreement_views.disagreement_adjudicate, name="disagreement_adjudicate"),
    path(D + "comments/", disagreement_views.disagreement_comment, name="disagreement_comment"),
    path(
        R + "attribution/<int:trace_id>/adjudicate/",
        attribution_views.attribution_adjudicate_view,
        name="attribution_adjudicate",
    ),
    path(R + "revise/<str:code>/", disagreement_views.round_revise, name="round_revise"),
    path(R + "<str:action>/", views.round_action, name="round_action"),
]
