"""Release API: list/create, detail, zip download. Thin: parse, call one service/selector, render."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.models import Round
from annotations.releases.selectors import release_blind_for, release_get, release_list, release_may_download
from annotations.releases.serializers import ReleaseDetailOut, ReleaseIn, ReleaseOut
from annotations.releases.services import release_create, release_retry, release_zip_file
from taxonomy.models import TaxonomyVersion
from traces import storage
from traces.projects.permissions import ProjectScopedMixin


class ReleaseListApi(ProjectScopedMixin, generics.ListAPIView):
    """Releases of a project, newest first; POST (managers) creates one and starts its build."""

    serializer_class = ReleaseOut
    capability = {"GET": "view", "POST": "manage"}

    def get_queryset(self):
        return release_list(project=self.project)

    @extend_schema(request=ReleaseIn, responses={202: ReleaseOut})
    def post(self, request, slug):
        data = ReleaseIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        round_obj = None
        if d.get("round"):
            round_obj = Round.objects.filter(project=self.project, pk=d["round"]).first()
            if round_obj is None:
                raise NotFound("No such round in this project.")
        version = None
        if d.get("taxonomy_version"):
            version = TaxonomyVersion.objects.filter(pk=d["taxonomy_version"]).first()
            if version is None:
                raise NotFound("No such taxonomy version.")
        release = release_create(
            project=self.project,
            by=request.user,
            selection=d["selection"],
            round=round_obj,
            filters=d.get("filters") or {},
            options=d.get("options"),
            taxonomy_version=version,
            title=d["title"],
            notes=d["notes"],
        )
        release = release_get(project=self.project, number=release.number)
        return Response(ReleaseOut(release).data, status=status.HTTP_202_ACCEPTED)


class ReleaseDetailApi(ProjectScopedMixin, APIView):
    """One release with its manifest and file checksums."""

    @extend_schema(responses={200: ReleaseDetailOut})
    def get(self, request, slug, number):
        release = release_get(project=self.project, number=number)
        if release is None:
            raise NotFound("No such release.")
        return Response(ReleaseDetailOut(release).data)


class ReleaseRetryApi(ProjectScopedMixin, APIView):
    """Build a failed release again, the same number and inputs (managers); 409 if it is not failed."""

    capability = "manage"

    @extend_schema(request=None, responses={202: ReleaseOut})
    def post(self, request, slug, number):
        release = release_get(project=self.project, number=number)
        if release is None:
            raise NotFound("No such release.")
        release_retry(release=release, by=request.user)
        return Response(ReleaseOut(release_get(project=self.project, number=number)).data, status=202)


class ReleaseDownloadApi(ProjectScopedMixin, APIView):
    """The zip of a published release (managers; members where the project allows it)."""

    @extend_schema(responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY)})
    def get(self, request, slug, number):
        if not release_may_download(project=self.project, role=self.role):
            raise PermissionDenied("Only managers download releases in this project (a manager can allow members).")
        release = release_get(project=self.project, number=number)
        if release is None or not release.is_done:
            raise NotFound("No such published release.")
        if why := release_blind_for(user=request.user, release=release):
            raise PermissionDenied(why)
        try:
            path, name = release_zip_file(release=release)
        except ValidationError as exc:
            raise NotFound(str(exc))
        return storage.download_response(path, filename=name, content_type="application/zip")
