"""Monitoring and alerts API: the failure series (members), alert rules, webhooks and what fired
with every delivery try (managers). Thin."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.analytics.selectors import AGREED
from annotations.experiments.selectors import experiment_sources
from annotations.models import AlertEvent, AlertRule, Webhook, WebhookDelivery
from annotations.monitoring.series import failure_series, series_as_dict
from annotations.monitoring.services import RULE_FIELDS, alert_rule_create, webhook_create, webhook_delete
from traces.api_errors import QueryParamError
from traces.projects.permissions import ProjectScopedMixin


def _django_errors(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})


class MonitoringSeriesApi(ProjectScopedMixin, APIView):
    """Each mode's and category's share per day or week (traces by import date), with 95% intervals;
    judge-corrected per period where it has a human sample (``rater=corrected:<judge id>``)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("bucket", str, enum=["day", "week"], description="Default week."),
            OpenApiParameter("cohort", str, description="Only these traces, as an experiment's cohort."),
            OpenApiParameter("rater", str, description='"agreed" (default), a rater id, or corrected:<judge id>.'),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT)},
    )
    def get(self, request, slug):
        params = request.query_params
        source = params.get("rater") or AGREED
        if source not in {s for s, _ in experiment_sources(user=request.user, project=self.project)}:
            raise QueryParamError("rater", f"no rater {source[:40]!r} you may see")
        try:
            series = failure_series(user=request.user, project=self.project, source=source,
                                    cohort=params.get("cohort", ""), bucket=params.get("bucket") or "week")  # fmt: skip
        except DjangoValidationError as exc:
            raise _django_errors(exc) from None
        return Response(series_as_dict(series))


class AlertRuleSerializer(serializers.ModelSerializer):
    class Meta:
        model = AlertRule
        fields = ["id", *RULE_FIELDS, "active", "firing", "last_evaluated_at", "created_at"]
        read_only_fields = ["id", "active", "firing", "last_evaluated_at", "created_at"]


class AlertRulesApi(ProjectScopedMixin, APIView):
    """The project's alert rules (GET), or a new one (POST)."""

    capability = "manage"

    @extend_schema(responses={200: AlertRuleSerializer(many=True)})
    def get(self, request, slug):
        return Response(AlertRuleSerializer(self.project.alert_rules.all(), many=True).data)

    @extend_schema(request=AlertRuleSerializer, responses={201: AlertRuleSerializer})
    def post(self, request, slug):
        given = AlertRuleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            rule = alert_rule_create(project=self.project, by=request.user, data=given.validated_data)
        except DjangoValidationError as exc:
            raise _django_errors(exc) from None
        return Response(AlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class WebhookSerializer(serializers.ModelSerializer):
    class Meta:
        model = Webhook
        fields = ["id", "url", "active", "secret_prefix", "created_at"]
        read_only_fields = ["id", "active", "secret_prefix", "created_at"]


class WebhooksApi(ProjectScopedMixin, APIView):
    """The project's webhooks, each listed by its secret's prefix (GET); a new one (POST), whose
    answer holds the whole secret: the only time it is shown."""

    capability = "manage"

    @extend_schema(responses={200: WebhookSerializer(many=True)})
    def get(self, request, slug):
        return Response(WebhookSerializer(self.project.webhooks.all(), many=True).data)

    @extend_schema(request=WebhookSerializer, responses={201: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug):
        given = WebhookSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            hook, secret = webhook_create(project=self.project, by=request.user, url=given.validated_data["url"])
        except DjangoValidationError as exc:
            raise _django_errors(exc) from None
        return Response({**WebhookSerializer(hook).data, "secret": secret}, status=status.HTTP_201_CREATED)


class WebhookDetailApi(ProjectScopedMixin, APIView):
    capability = "manage"

    @extend_schema(responses={204: None})
    def delete(self, request, slug, pk):
        webhook_delete(hook=get_object_or_404(Webhook, project=self.project, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = ["id", "webhook", "attempt", "state", "due_at", "sent_at", "status_code", "response", "error",
                  "duration_ms"]  # fmt: skip


class AlertEventSerializer(serializers.ModelSerializer):
    rule_name = serializers.CharField(source="rule.name")
    deliveries = DeliverySerializer(many=True)

    class Meta:
        model = AlertEvent
        fields = ["id", "rule", "rule_name", "code", "fired_at", "resolved_at", "message", "figures", "deliveries"]


class AlertEventsApi(ProjectScopedMixin, APIView):
    """What fired (newest first, at most 200), each with every delivery try and its answer."""

    capability = "manage"

    @extend_schema(responses={200: AlertEventSerializer(many=True)})
    def get(self, request, slug):
        events = (
            AlertEvent.objects.filter(rule__project=self.project)
            .select_related("rule")
            .prefetch_related("deliveries")[:200]
        )
        return Response(AlertEventSerializer(events, many=True).data)
