"""Raters, annotations, per-mode labels, their history, and open codes."""

from django.conf import settings
from django.db import models


class Rater(models.Model):
    """Who produced an annotation: a person, an LLM judge, a baseline model or an imported source."""

    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        LLM = "llm", "LLM judge"
        BASELINE = "baseline", "Baseline classifier"
        IMPORTED = "imported", "Imported source"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    name = models.CharField(max_length=200, unique=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="rater",
    )
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(kind="human", user__isnull=False) | ~models.Q(kind="human")),
                name="rater_human_has_user",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=["human", "llm", "baseline", "imported"]),
                name="rater_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_human(self) -> bool:
        return self.kind == self.Kind.HUMAN


class OpenCode(models.Model):
    """A free tag for open coding; reusable across the traces of a project.

    ``promoted_mode`` is the failure mode it was promoted to (a mode added to, or extended in, a
    draft of the next taxonomy version; ``annotations.codes.services.open_code_promote``)."""

    class Promotion(models.TextChoices):
        ADD = "add", "Added as a new mode"
        EXTEND = "extend", "Extended a mode's definition"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="open_codes")
    name = models.CharField(max_length=80)
    created_at = models.DateTimeField(auto_now_add=True)
    promoted_mode = models.ForeignKey(
        "taxonomy.FailureMode", null=True, blank=True, on_delete=models.SET_NULL, related_name="promoted_from"
    )
    promoted_how = models.CharField(max_length=10, choices=Promotion.choices, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)
    promoted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="open_code_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class Annotation(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    class TaskSuccess(models.TextChoices):
        YES = "yes", "Yes"
        NO = "no", "No"
        UNKNOWN = "unknown", "Unknown"

    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="annotations")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="annotations")
    taxonomy_version = models.ForeignKey(
        "taxonomy.TaxonomyVersion", on_delete=models.PROTECT, related_name="annotations"
    )
    round = models.ForeignKey(
        "annotations.Round", null=True, blank=True, on_delete=models.CASCADE, related_name="annotations"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    task_success = models.CharField(max_length=10, choices=TaskSuccess.choices, default=TaskSuccess.UNKNOWN)
    notes = models.TextField(blank=True)
    open_codes = models.ManyToManyField(OpenCode, blank=True, related_name="annotations")
    # Optimistic concurrency: every accepted save increments it; a save must name the one it read.
    revision = models.PositiveIntegerField(default=0)
    # For non-human raters: which run produced it, raw answer, tokens, cost, ...
    source = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["trace", "rater", "taxonomy_version"],
                condition=models.Q(round__isnull=True),
                name="annotation_unique_outside_round",
            ),
            models.UniqueConstraint(
                fields=["trace", "rater", "taxonomy_version", "round"],
                condition=models.Q(round__isnull=False),
                name="annotation_unique_in_round",
            ),
            models.CheckConstraint(condition=models.Q(state__in=["draft", "submitted"]), name="annotation_state_valid"),
        ]
        # updated_at too: a rater's count and latest change are read off the index alone (labels_fingerprint)
        indexes = [models.Index(fields=["rater", "state", "updated_at"], name="annotation_rater_updated")]

    def __str__(self) -> str:
        return f"{self.rater} on {self.trace_id} ({self.state})"


class ModeLabel(models.Model):
    class Decision(models.TextChoices):
        PRESENT = "present", "Present"
        ABSENT = "absent", "Absent"
        UNSURE = "unsure", "Unsure"

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="labels")
    mode = models.ForeignKey("taxonomy.FailureMode", on_delete=models.PROTECT, related_name="labels")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    # [{"step": <step index>} | {"lines": [first, last]}], validated against the trace in services.
    evidence = models.JSONField(default=list, blank=True)
    rationale = models.TextField(blank=True)
    confidence = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["mode__order", "mode__code"]
        constraints = [
            models.UniqueConstraint(fields=["annotation", "mode"], name="mode_label_unique"),
            models.CheckConstraint(
                condition=models.Q(decision__in=["present", "absent", "unsure"]),
                name="mode_label_decision_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.mode_id}: {self.decision}"


class AnnotationEvent(models.Model):
    """History of an annotation: who changed what, when, with the state before and after."""

    class Action(models.TextChoices):
        SAVE = "save", "Saved"
        SUBMIT = "submit", "Submitted"
        REOPEN = "reopen", "Reopened"
        RECODE = "recode", "Open codes renamed or merged by a manager"
        SEARCH = "search", "Open code added or removed from a search"

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="events")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    action = models.CharField(max_length=10, choices=Action.choices)
    revision = models.PositiveIntegerField()
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)

    class Meta:
        ordering = ["annotation", "revision"]

    def __str__(self) -> str:
        return f"{self.action} r{self.revision}"
