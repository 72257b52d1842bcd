from rest_framework import serializers

from traces.models import Membership, Project


class ProjectOut(serializers.ModelSerializer):
    n_traces = serializers.IntegerField(read_only=True)
    taxonomy_version = serializers.IntegerField(source="taxonomy_version_id", allow_null=True)

    class Meta:
        model = Project
        fields = ["id", "slug", "name", "description", "taxonomy_version", "n_traces", "created_at"]


class MemberOut(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at"]


class MemberIn(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices)
