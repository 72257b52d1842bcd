from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from traces.projects.permissions import ProjectScopedMixin
from traces.projects.selectors import project_get_for_user, project_list_for_user, project_members
from traces.projects.serializers import MemberIn, MemberOut, ProjectOut
from traces.projects.services import membership_set


class ProjectListApi(generics.ListAPIView):
    """The projects the caller belongs to."""

    serializer_class = ProjectOut

    def get_queryset(self):
        return project_list_for_user(user=self.request.user)


class ProjectDetailApi(generics.RetrieveAPIView):
    serializer_class = ProjectOut

    def get_object(self):
        project, _ = project_get_for_user(user=self.request.user, slug=self.kwargs["slug"])
        return project_list_for_user(user=self.request.user).get(pk=project.pk)


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
