"""API routes of judges: connections, prompts, runs, quality, comparison, imported raters."""

from django.urls import path

from annotations.judge.api import compare, live, reliability
from annotations.judge.api import connections as conns
from annotations.judge.api import runs as judge

urlpatterns = [
    path("projects/<slug:slug>/live/policy/", live.LivePolicyApi.as_view(), name="api-live-policy"),
    path("projects/<slug:slug>/judge-runs/", judge.JudgeRunListApi.as_view(), name="api-judge-runs"),
    path("projects/<slug:slug>/judge-runs/<int:run_id>/", judge.JudgeRunDetailApi.as_view(), name="api-judge-run"),
    path(
        "projects/<slug:slug>/judge-runs/<int:run_id>/cancel/",
        judge.JudgeRunCancelApi.as_view(),
        name="api-judge-run-cancel",
    ),
    path(
        "projects/<slug:slug>/judge-runs/<int:run_id>/resume/",
        judge.JudgeRunResumeApi.as_view(),
        name="api-judge-run-resume",
    ),
    path(
        "projects/<slug:slug>/judge-runs/<int:run_id>/items/",
        judge.JudgeItemListApi.as_view(),
        name="api-judge-run-items",
    ),
    path(
        "projects/<slug:slug>/judge-runs/<int:run_id>/quality/",
        judge.JudgeQualityApi.as_view(),
        name="api-judge-run-quality",
    ),
    path(
        "projects/<slug:slug>/judge-runs/<int:run_id>/reliability/",
        reliability.JudgeReliabilityApi.as_view(),
        name="api-judge-run-reliability",
    ),
    path("projects/<slug:slug>/judge-connections/", conns.ConnectionListApi.as_view(), name="api-judge-connections"),
    path(
        "projects/<slug:slug>/judge-connections/<int:conn_id>/",
        conns.ConnectionDetailApi.as_view(),
        name="api-judge-connection",
    ),
    path(
        "projects/<slug:slug>/judge-connections/<int:conn_id>/test/",
        conns.ConnectionTestApi.as_view(),
        name="api-judge-connection-test",
    ),
    path("projects/<slug:slug>/judge-comparison/", compare.JudgeComparisonApi.as_view(), name="api-judge-comparison"),
    path("projects/<slug:slug>/imported-raters/", compare.ImportedRaterListApi.as_view(), name="api-imported-raters"),
    path("projects/<slug:slug>/judge-prompts/", judge.PromptListApi.as_view(), name="api-judge-prompts"),
]
