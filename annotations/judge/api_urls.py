from django.urls import path

from annotations.judge import api as judge

urlpatterns = [
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
    path("projects/<slug:slug>/judge-prompts/", judge.PromptListApi.as_view(), name="api-judge-prompts"),
]
