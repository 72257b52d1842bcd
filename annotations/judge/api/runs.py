"""The judge API: runs (list, create, detail, cancel, resume), their items, quality, prompt versions."""

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.judge.prompts import prompt_template_active, prompt_template_save
from annotations.judge.runs import judge_run_cancel, judge_run_create, judge_run_resume
from annotations.judge.selectors import judge_items, judge_quality, judge_run_list, prompt_versions
from annotations.judge.serializers import (
    JudgeItemOut,
    JudgeQualityOut,
    JudgeRunDetailOut,
    JudgeRunIn,
    JudgeRunOut,
    PromptIn,
    PromptOut,
)
from annotations.models import JudgeItem, JudgeRun
from traces.api_errors import RequestConflict
from traces.projects.permissions import ProjectScopedMixin


class _RunMixin(ProjectScopedMixin):
    capability = "manage"

    def get_run(self) -> JudgeRun:
        return get_object_or_404(judge_run_list(project=self.project), pk=self.kwargs["run_id"])


class JudgeRunListApi(ProjectScopedMixin, generics.ListAPIView):
    """Judge runs of the project, newest first (managers)."""

    capability = "manage"
    serializer_class = JudgeRunOut

    def get_queryset(self):
        return judge_run_list(project=self.project)

    @extend_schema(request=JudgeRunIn, responses={201: JudgeRunDetailOut})
    def post(self, request, slug):
        data = JudgeRunIn(data=request.data)
        data.is_valid(raise_exception=True)
        run = judge_run_create(project=self.project, by=request.user, **data.validated_data)
        return Response(JudgeRunDetailOut(run).data, status=status.HTTP_201_CREATED)


class JudgeRunDetailApi(_RunMixin, generics.RetrieveAPIView):
    """One run with its live progress (done / failed / remaining, rate, ETA, tokens, cost)."""

    serializer_class = JudgeRunDetailOut

    def get_object(self):
        return self.get_run()


class _RunActionApi(_RunMixin, APIView):
    action_name = ""

    @extend_schema(request=None, responses={200: JudgeRunDetailOut})
    def post(self, request, slug, run_id):
        run = self.get_run()
        try:
            if self.action_name == "cancel":
                run = judge_run_cancel(run=run, by=request.user)
            else:
                run = judge_run_resume(run=run, by=request.user)
        except ValidationError as exc:  # the run is not in a state that allows it
            raise RequestConflict(" ".join(exc.messages)) from exc
        return Response(JudgeRunDetailOut(self.get_run()).data)


class JudgeRunCancelApi(_RunActionApi):
    """Cancel (pause) a queued or running run."""

    action_name = "cancel"


class JudgeRunResumeApi(_RunActionApi):
    """Resume a paused or failed run."""

    action_name = "resume"


class JudgeItemListApi(_RunMixin, generics.ListAPIView):
    """The run's items: state, raw answer, parsed answer, tokens, latency, cost, truncation."""

    serializer_class = JudgeItemOut
    queryset = JudgeItem.objects.none()

    def get_queryset(self):
        state = self.request.query_params.get("state") or None
        return judge_items(run=self.get_run(), state=state if state in JudgeItem.State.values else None)


class JudgeQualityApi(_RunMixin, APIView):
    """The judge against the humans' agreed labels: per mode and overall, and the worst disagreements."""

    @extend_schema(responses={200: JudgeQualityOut})
    def get(self, request, slug, run_id):
        return Response(JudgeQualityOut(judge_quality(run=self.get_run(), user=request.user)).data)


class PromptListApi(ProjectScopedMixin, generics.ListAPIView):
    """Prompt versions for the project's taxonomy version; POST saves a new version."""

    capability = "manage"
    serializer_class = PromptOut

    def get_queryset(self):
        version = self.project.taxonomy_version
        prompt_template_active(taxonomy_version=version)
        return prompt_versions(taxonomy_version=version)

    @extend_schema(request=PromptIn, responses={201: PromptOut})
    def post(self, request, slug):
        data = PromptIn(data=request.data)
        data.is_valid(raise_exception=True)
        prompt = prompt_template_save(
            taxonomy_version=self.project.taxonomy_version, by=request.user, **data.validated_data
        )
        return Response(PromptOut(prompt).data, status=status.HTTP_201_CREATED)
