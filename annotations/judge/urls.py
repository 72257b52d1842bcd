"""Pages of judges: connections, runs, quality, comparison, self-agreement, imported raters."""

from django.urls import path

from annotations.judge.views import compare, live, reliability
from annotations.judge.views import connections as conns
from annotations.judge.views import runs as judge

urlpatterns = [
    path("p/<slug:slug>/judge/", judge.judge_list, name="judge_list"),
    path("p/<slug:slug>/judge/new/", judge.judge_run_new, name="judge_run_new"),
    path("p/<slug:slug>/judge/live/", live.live_policy_page, name="judge_live"),
    path("p/<slug:slug>/judge/prompt/", judge.judge_prompt_page, name="judge_prompt"),
    path("p/<slug:slug>/judge/compare/", compare.judge_compare_page, name="judge_compare"),
    path("p/<slug:slug>/judge/reliability/", reliability.judge_reliability_page, name="judge_reliability"),
    path("p/<slug:slug>/judge/imports/", compare.judge_imports_page, name="judge_imports"),
    path("p/<slug:slug>/judge/connections/", conns.connection_list_page, name="judge_connections"),
    path("p/<slug:slug>/judge/connections/<int:conn_id>/", conns.connection_page, name="judge_connection"),
    path(
        "p/<slug:slug>/judge/connections/<int:conn_id>/delete/",
        conns.connection_delete_page,
        name="judge_connection_delete",
    ),
    path("p/<slug:slug>/judge/runs/<int:run_id>/", judge.judge_run_page, name="judge_run"),
    path("p/<slug:slug>/judge/runs/<int:run_id>/progress/", judge.judge_run_progress_fragment, name="judge_progress"),
    path("p/<slug:slug>/judge/runs/<int:run_id>/quality/", judge.judge_quality_page, name="judge_quality"),
    path("p/<slug:slug>/judge/runs/<int:run_id>/items/<int:item_id>/", judge.judge_item_page, name="judge_item"),
    path("p/<slug:slug>/judge/runs/<int:run_id>/<str:action>/", judge.judge_run_action, name="judge_run_action"),
]
