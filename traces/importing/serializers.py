"""DRF serializers of import jobs and uploads."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from traces.importing.jobs import import_job_progress
from traces.importing.service import IMPORT_FORMATS
from traces.models import ImportJob


class ImportJobIn(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True), allow_empty=False, help_text="Trace files or .zip files."
    )
    format = serializers.ChoiceField(choices=IMPORT_FORMATS, default="auto")
    import_rest = serializers.BooleanField(
        default=False,
        help_text="Import the rest: a JSONL line that is not JSON (a log whose process died mid-write) is "
        "skipped and listed in its file's report line (broken_lines) instead of refusing the import.",
    )


class BrokenLineOut(serializers.Serializer):
    line = serializers.IntegerField()
    reason = serializers.CharField()


class FileLineOut(serializers.Serializer):
    """One file of the import (traces.importing.report.FileLine)."""

    file = serializers.CharField()
    status = serializers.ChoiceField(choices=["imported", "refused", "companion", "not stored"])
    format = serializers.CharField(help_text="The format read (several when records differ).")
    traces = serializers.IntegerField(help_text="New traces (would-be traces when not stored).")
    merged = serializers.IntegerField(help_text="Records whose trace was stored: kept as another source of it.")
    skipped = serializers.IntegerField(help_text="Records already imported (same text and identity).")
    steps = serializers.IntegerField()
    agents = serializers.ListField(child=serializers.CharField(), help_text="Up to 12 agent names.")
    n_agents = serializers.IntegerField()
    reason = serializers.CharField(help_text="Why it was refused, or what a companion file was used for.")
    broken_lines = BrokenLineOut(
        many=True, required=False, help_text="With import_rest: the lines skipped because they were not JSON."
    )


class ImportJobOut(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)
    bytes_done = serializers.SerializerMethodField()
    percent = serializers.SerializerMethodField()
    n_imported = serializers.SerializerMethodField()
    n_duplicates = serializers.SerializerMethodField()
    n_failed = serializers.SerializerMethodField()
    report = extend_schema_field(FileLineOut(many=True))(serializers.JSONField(read_only=True))
    n_merged = serializers.IntegerField(read_only=True, help_text="Records merged into traces already stored.")
    can_retry = serializers.BooleanField(
        read_only=True, help_text="Failed with its input kept (not refused): POST .../retry/ queues it again."
    )

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "status",
            "format",
            "import_rest",
            "file_names",
            "bytes_total",
            "bytes_done",
            "percent",
            "n_imported",
            "n_duplicates",
            "n_failed",
            "n_merged",
            "report",
            "error",
            "failure",
            "attempts",
            "can_retry",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def _figures(self, job: ImportJob) -> dict:
        cache = self.context.setdefault("_figures", {})
        if job.pk not in cache:
            cache[job.pk] = import_job_progress(job=job)
        return cache[job.pk]

    def get_bytes_done(self, job: ImportJob) -> int:
        return self._figures(job)["bytes_done"]

    def get_percent(self, job: ImportJob) -> int:
        return self._figures(job)["percent"]

    def get_n_imported(self, job: ImportJob) -> int:
        return self._figures(job)["n_imported"]

    def get_n_duplicates(self, job: ImportJob) -> int:
        return self._figures(job)["n_duplicates"]

    def get_n_failed(self, job: ImportJob) -> int:
        """Files refused (every one is named in ``report``); nothing is stored when any was."""
        refused = sum(1 for line in job.report or [] if line.get("status") == "refused")
        return refused or (1 if job.status == ImportJob.Status.FAILED else 0)
