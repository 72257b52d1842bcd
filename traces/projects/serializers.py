"""DRF serializers of projects and memberships."""

from rest_framework import serializers

from traces.models import Membership, Project


class ProjectOut(serializers.ModelSerializer):
    n_traces = serializers.IntegerField(read_only=True)
    taxonomy_version = serializers.IntegerField(
        source="taxonomy_version_id", allow_null=True, help_text="The working taxonomy version's id."
    )
    taxonomy_version_label = serializers.CharField(source="taxonomy_version.label", allow_null=True, default=None)

    class Meta:
        model = Project
        fields = [
            "id",
            "slug",
            "name",
            "description",
            "taxonomy_version",
            "taxonomy_version_label",
            "reveal_suggestions",
            "n_traces",
            "created_at",
        ]


class ProjectSettingsIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(allow_blank=True, required=False)
    reveal_suggestions = serializers.BooleanField(required=False)
    taxonomy_version = serializers.IntegerField(required=False, help_text="A published version's id.")


class MemberOut(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at"]


class MemberIn(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices)
