"""Dataset releases: an immutable, versioned export of a project's labels, and who may download them.

A release row is written once with its options, filled in by the build job (status, progress,
counts, manifest, files) and frozen when the build is done: services refuse changes and a
database trigger (migration ``releases_initial``) refuses UPDATE and DELETE of a done release
and INSERT/UPDATE/DELETE of its files, even from raw SQL or the admin.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Release(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Building"
        DONE = "done", "Published"
        FAILED = "failed", "Failed"

    class Selection(models.TextChoices):
        AGREED = "agreed", "All traces with agreed labels"
        ROUND = "round", "The traces of one round"
        FILTER = "filter", "Traces matching a filter"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="releases")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    taxonomy_version = models.ForeignKey("taxonomy.TaxonomyVersion", on_delete=models.PROTECT, related_name="+")
    selection = models.CharField(max_length=10, choices=Selection.choices, default=Selection.AGREED)
    round = models.ForeignKey(
        "annotations.Round", null=True, blank=True, on_delete=models.PROTECT, related_name="releases"
    )
    # {"mas_name": [...], "llm_name": [...], "benchmark": [...]} for selection=filter
    filters = models.JSONField(default=dict, blank=True)
    # {"majority": bool, "raters": bool, "judge": bool, "evidence": bool, "trace_text": bool, "formats": [...]}
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # Liveness (traces/jobs.py): build attempts started, and when the build task was last sent.
    attempts = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField(default=timezone.now)
    n_total = models.PositiveIntegerField(default=0)
    n_done = models.PositiveIntegerField(default=0)
    n_traces = models.PositiveIntegerField(default=0)
    n_mapped = models.PositiveIntegerField(default=0, help_text="Labels carried over from other taxonomy versions.")
    manifest = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="release_number_unique"),
            models.CheckConstraint(
                condition=models.Q(status__in=["queued", "running", "done", "failed"]), name="release_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(selection__in=["agreed", "round", "filter"]), name="release_selection_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(selection="round") | models.Q(round__isnull=False),
                name="release_round_selection_has_round",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} v{self.number}"

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return int(100 * self.n_done / self.n_total) if self.n_total else 0

    @property
    def is_done(self) -> bool:
        return self.status == self.Status.DONE


class ReleaseFile(models.Model):
    """One file of a release, with its checksum; the zip holds all the others."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20)  # jsonl, csv, parquet, card, manifest, zip
    size_bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    path = models.CharField(
        max_length=500, help_text="A storage name (MEDIA_ROOT or the STORAGE_URL store; traces.storage)."
    )

    class Meta:
        ordering = ["release", "name"]
        constraints = [
            models.UniqueConstraint(fields=["release", "name"], name="release_file_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class ReleasePolicy(models.Model):
    """Who besides managers may download a project's published releases (default: nobody)."""

    project = models.OneToOneField("traces.Project", on_delete=models.CASCADE, related_name="release_policy")
    members_may_download = models.BooleanField(
        default=False,
        help_text="Annotators and viewers may download published releases (managers always may).",
    )
    updated_at = models.DateTimeField(auto_now=True)
