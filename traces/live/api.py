"""Live traces API (managers): what the receiver took per hour, the lag, the live traces; an
explicit flush; ingest keys (the whole key only in the answer that creates it). Thin."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.live.assembly import live_flush
from traces.live.keys import ingest_key_create, ingest_key_revoke
from traces.live.stats import live_summary
from traces.models import IngestKey, LiveTrace
from traces.projects.permissions import ProjectScopedMixin


class LiveTraceSerializer(serializers.ModelSerializer):
    class Meta:
        model = LiveTrace
        fields = ["otel_trace_id", "state", "trace", "n_spans", "first_span_at", "last_span_at", "root_ended",
                  "assembled_at", "changed_after_labelling", "error"]  # fmt: skip


class LiveApi(ProjectScopedMixin, APIView):
    """Per hour (last 24): requests, refused requests, spans acknowledged, new, rejected with the
    reasons, traces assembled; the lag after the quiet period (p50, p95); the 50 newest live traces."""

    capability = "manage"

    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request, slug):
        recent = LiveTrace.objects.filter(project=self.project).order_by("-last_span_at")[:50]
        return Response({**live_summary(project=self.project), "traces": LiveTraceSerializer(recent, many=True).data})


class LiveFlushApi(ProjectScopedMixin, APIView):
    """Assemble every open live trace now, without waiting for its quiet period (an explicit flush)."""

    capability = "manage"

    @extend_schema(request=None, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug):
        done = live_flush(project=self.project)
        return Response({"assembled": sum(1 for d in done if d.state == "assembled"),
                         "failed": sum(1 for d in done if d.state == "failed")})  # fmt: skip


class IngestKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = IngestKey
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at"]


class IngestKeysApi(ProjectScopedMixin, APIView):
    """The project's ingest keys, by prefix (GET); a new one (POST), whose answer holds the whole key
    (``key``): the only time it is shown."""

    capability = "manage"

    @extend_schema(responses={200: IngestKeySerializer(many=True)})
    def get(self, request, slug):
        return Response(IngestKeySerializer(self.project.ingest_keys.all(), many=True).data)

    @extend_schema(request=IngestKeySerializer, responses={201: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug):
        given = IngestKeySerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            key, plain = ingest_key_create(project=self.project, name=given.validated_data["name"], by=request.user)
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        return Response({**IngestKeySerializer(key).data, "key": plain}, status=status.HTTP_201_CREATED)


class IngestKeyRevokeApi(ProjectScopedMixin, APIView):
    capability = "manage"

    @extend_schema(request=None, responses={200: IngestKeySerializer})
    def post(self, request, slug, pk):
        key = ingest_key_revoke(key=get_object_or_404(IngestKey, project=self.project, pk=pk))
        return Response(IngestKeySerializer(key).data)
