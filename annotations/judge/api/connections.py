"""The judge's provider connections through the API (managers). The key is write-only."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.judge.connections import connection_delete, connection_list, connection_save, connection_test
from annotations.models import ProviderConnection
from traces.api_errors import RequestConflict
from traces.projects.permissions import ProjectScopedMixin


class ConnectionOut(serializers.ModelSerializer):
    models = serializers.ListField(source="models_list", child=serializers.CharField(), read_only=True)
    key_source = serializers.CharField(read_only=True, help_text='"stored (…abcd)", "environment variable X" or "none"')
    has_stored_key = serializers.SerializerMethodField()

    class Meta:
        model = ProviderConnection
        fields = [
            "id",
            "name",
            "preset",
            "base_url",
            "models",
            "key_env",
            "key_source",
            "has_stored_key",
            "price_in",
            "price_out",
            "adaptations",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "adaptations": {
                "help_text": "Per model, what its server refused (max_tokens, temperature, response_format, "
                "system_role, developer_role) in the order learned; new runs of the model start without it"
            }
        }

    def get_has_stored_key(self, obj) -> bool:
        return bool(obj.key_encrypted)


class ConnectionIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    preset = serializers.ChoiceField(choices=ProviderConnection.Preset.choices, default="custom")
    base_url = serializers.CharField(max_length=500)
    models = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)
    api_key = serializers.CharField(
        required=False, allow_null=True, default=None, write_only=True, help_text="Stored encrypted; never returned."
    )
    key_env = serializers.CharField(required=False, allow_blank=True, default="")
    clear_key = serializers.BooleanField(required=False, default=False)
    price_in = serializers.DecimalField(required=False, default=0, max_digits=10, decimal_places=4)
    price_out = serializers.DecimalField(required=False, default=0, max_digits=10, decimal_places=4)


class ProbeOut(serializers.Serializer):
    ok = serializers.BooleanField()
    model = serializers.CharField()
    message = serializers.CharField(help_text="The model's answer, or the server's exact error")
    latency_ms = serializers.IntegerField()
    dropped = serializers.ListField(child=serializers.CharField())


class ProbeIn(serializers.Serializer):
    model = serializers.CharField(required=False, allow_blank=True, default="")


class _Mixin(ProjectScopedMixin):
    capability = "manage"

    def get_connection(self) -> ProviderConnection:
        return get_object_or_404(connection_list(project=self.project), pk=self.kwargs["conn_id"])


class ConnectionListApi(_Mixin, generics.ListAPIView):
    """The project's LLM connections (the key is never returned)."""

    serializer_class = ConnectionOut

    def get_queryset(self):
        return connection_list(project=self.project)

    @extend_schema(request=ConnectionIn, responses={201: ConnectionOut})
    def post(self, request, slug):
        data = ConnectionIn(data=request.data)
        data.is_valid(raise_exception=True)
        conn = connection_save(project=self.project, by=request.user, **data.validated_data)
        return Response(ConnectionOut(conn).data, status=status.HTTP_201_CREATED)


class ConnectionDetailApi(_Mixin, APIView):
    """One connection: read, replace its settings (PUT; api_key omitted keeps the stored key), delete."""

    @extend_schema(responses={200: ConnectionOut})
    def get(self, request, slug, conn_id):
        return Response(ConnectionOut(self.get_connection()).data)

    @extend_schema(request=ConnectionIn, responses={200: ConnectionOut})
    def put(self, request, slug, conn_id):
        data = ConnectionIn(data=request.data)
        data.is_valid(raise_exception=True)
        conn = connection_save(
            project=self.project, by=request.user, connection=self.get_connection(), **data.validated_data
        )
        return Response(ConnectionOut(conn).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, conn_id):
        try:
            connection_delete(connection=self.get_connection())
        except ValidationError as exc:
            raise RequestConflict(" ".join(exc.messages)) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConnectionTestApi(_Mixin, APIView):
    """Make one tiny call through the connection: the model's answer or the server's exact error."""

    @extend_schema(request=ProbeIn, responses={200: ProbeOut})
    def post(self, request, slug, conn_id):
        data = ProbeIn(data=request.data)
        data.is_valid(raise_exception=True)
        probe = connection_test(connection=self.get_connection(), model=data.validated_data["model"])
        return Response(ProbeOut(probe).data)
