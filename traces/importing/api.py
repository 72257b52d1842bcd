"""The import API: upload files as a job, list, read and retry jobs."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.importing.jobs import import_job_create, import_job_retry
from traces.importing.serializers import ImportJobIn, ImportJobOut
from traces.models import ImportJob
from traces.projects.permissions import ProjectScopedMixin


class ImportJobListApi(ProjectScopedMixin, generics.ListAPIView):
    """Import jobs of the project, newest first (managers). POST uploads files as a new job."""

    capability = "manage"
    serializer_class = ImportJobOut
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self):
        return ImportJob.objects.filter(project=self.project).select_related("created_by").order_by("-created_at")

    @extend_schema(
        request={"multipart/form-data": ImportJobIn},
        responses={202: ImportJobOut},
        description="Upload trace files or zips; the import runs in the background. Poll the job for progress.",
    )
    def post(self, request, slug):
        data = ImportJobIn(data=request.data)
        data.is_valid(raise_exception=True)
        job = import_job_create(
            project=self.project,
            by=request.user,
            files=data.validated_data["files"],
            format=data.validated_data["format"],
            import_rest=data.validated_data["import_rest"],
        )
        return Response(ImportJobOut(job).data, status=status.HTTP_202_ACCEPTED)


class ImportJobDetailApi(ProjectScopedMixin, generics.RetrieveAPIView):
    """One import job: status, live progress while it runs, the result or the exact error."""

    capability = "manage"
    serializer_class = ImportJobOut

    def get_queryset(self):
        return ImportJob.objects.filter(project=self.project).select_related("created_by")


class ImportJobRetryApi(ProjectScopedMixin, APIView):
    """Queue a failed import again with its kept upload (managers). 409 when it is not failed, or
    was refused for its input (the upload is deleted then), or its upload has been deleted."""

    capability = "manage"

    @extend_schema(request=None, responses={202: ImportJobOut})
    def post(self, request, slug, pk):
        job = generics.get_object_or_404(ImportJob.objects.filter(project=self.project), pk=pk)
        job = import_job_retry(job=job)
        return Response(ImportJobOut(job).data, status=status.HTTP_202_ACCEPTED)
