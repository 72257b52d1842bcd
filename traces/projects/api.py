"""The projects API: projects, their settings and members."""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from taxonomy.models import TaxonomyVersion
from traces.projects.permissions import ProjectScopedMixin
from traces.projects.selectors import project_get_for_user, project_list_for_user, project_members
from traces.projects.serializers import MemberIn, MemberOut, ProjectOut, ProjectSettingsIn
from traces.projects.services import membership_set, project_settings_update


class ProjectListApi(generics.ListAPIView):
    """The projects the caller belongs to."""

    serializer_class = ProjectOut

    def get_queryset(self):
        return project_list_for_user(user=self.request.user)


class ProjectDetailApi(generics.RetrieveAPIView):
    """A project; PATCH (managers) changes its settings: name, description, reveal_suggestions and
    taxonomy_version, the working version (a published version's id)."""

    serializer_class = ProjectOut

    def get_object(self):
        project, _ = project_get_for_user(user=self.request.user, slug=self.kwargs["slug"])
        return project_list_for_user(user=self.request.user).get(pk=project.pk)

    @extend_schema(request=ProjectSettingsIn, responses={200: ProjectOut})
    def patch(self, request, slug):
        project, _ = project_get_for_user(user=request.user, slug=slug, capability="manage")
        data = ProjectSettingsIn(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        if "taxonomy_version" in fields:
            version = TaxonomyVersion.objects.filter(pk=fields["taxonomy_version"]).first()
            if version is None:
                raise ValidationError(
                    {"taxonomy_version": [f"No taxonomy version has id {fields['taxonomy_version']}."]}
                )
            fields["taxonomy_version"] = version
        project_settings_update(project=project, by=request.user, **fields)
        return Response(ProjectOut(project_list_for_user(user=request.user).get(pk=project.pk)).data)


class MemberListApi(ProjectScopedMixin, generics.ListAPIView):
    serializer_class = MemberOut
    capability = {"GET": "view", "POST": "manage"}

    def get_queryset(self):
        return project_members(project=self.project)

    @extend_schema(request=MemberIn, responses={200: MemberOut})
    def post(self, request, slug):
        data = MemberIn(data=request.data)
        data.is_valid(raise_exception=True)
        user = get_user_model().objects.filter(username=data.validated_data["username"]).first()
        if user is None:
            raise NotFound("No user with this username.")
        membership = membership_set(project=self.project, user=user, role=data.validated_data["role"])
        return Response(MemberOut(membership).data)
