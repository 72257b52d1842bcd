"""The live judge policy API (managers): the policy, today's spend, what it judged, skipped and
sampled (GET); set it (PUT). Thin."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.judge.live import live_policy_set, live_policy_summary
from traces.projects.permissions import ProjectScopedMixin


class LivePolicyIn(serializers.Serializer):
    active = serializers.BooleanField(default=True)
    connection = serializers.IntegerField()
    model = serializers.CharField(max_length=200)
    judge_share = serializers.FloatField(min_value=0, max_value=1)
    human_share = serializers.FloatField(min_value=0, max_value=1)
    human_round = serializers.IntegerField(required=False, allow_null=True)
    daily_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    daily_cost = serializers.DecimalField(required=False, allow_null=True, max_digits=12, decimal_places=4)


class LivePolicyApi(ProjectScopedMixin, APIView):
    """Each new live trace: judged with probability judge_share within the daily budget, put in the
    human round's queues with probability human_share (a uniformly random sample, the one corrected
    shares use). GET answers {"set": false} when the project has no policy."""

    capability = "manage"

    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request, slug):
        return Response(live_policy_summary(project=self.project) or {"set": False})

    @extend_schema(request=LivePolicyIn, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def put(self, request, slug):
        given = LivePolicyIn(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            live_policy_set(project=self.project, by=request.user, data=given.validated_data)
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        return Response(live_policy_summary(project=self.project))
