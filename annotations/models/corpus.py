"""Corpus search into the taxonomy loop: what a search became (an open code, a round sample, a
draft mode's examples) so it can be undone, and behaviour searches (a judge asked to find and quote
a described behaviour) with their hits and groups (``annotations.corpus``)."""

from django.conf import settings
from django.db import models


class SearchAction(models.Model):
    """One "turn these hits into ..." action, with what it changed, so that undo reverts exactly that."""

    class Kind(models.TextChoices):
        CODE = "code", "Open code on the hits"
        SAMPLE = "sample", "Sample for a round"
        EXAMPLES = "examples", "Examples of a draft mode"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="search_actions")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # the corpus search's parameters, or {"behaviour": <id>} for a behaviour search's hits
    query = models.JSONField(default=dict)
    trace_ids = models.JSONField(default=list)
    code = models.ForeignKey("annotations.OpenCode", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    round = models.ForeignKey("annotations.Round", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    mode = models.ForeignKey("taxonomy.FailureMode", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # what it changed: {"added": [annotation ids given the code], "created": [annotations it made]},
    # {"round_traces": [ids]}, {"before": examples text, "after": examples text}
    detail = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=["code", "sample", "examples"]), name="search_action_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({len(self.trace_ids)} traces)"


class BehaviourSearch(models.Model):
    """A described behaviour a judge connection looks for, trace by trace, within a budget."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        STOPPED = "stopped", "Stopped at its budget"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="behaviour_searches")
    description = models.TextField()
    query = models.JSONField(default=dict, help_text="The corpus search that selected the traces.")
    trace_ids = models.JSONField(default=list)
    connection = models.ForeignKey(
        "annotations.ProviderConnection", null=True, on_delete=models.SET_NULL, related_name="behaviour_searches"
    )
    model = models.CharField(max_length=200)
    max_tokens = models.PositiveBigIntegerField(help_text="Budget: input + output tokens.")
    max_cost = models.DecimalField(max_digits=16, decimal_places=8, null=True, blank=True)
    estimate_tokens = models.PositiveBigIntegerField(default=0)
    estimate_cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    n_done = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)  # a call costs fractions of a cent
    error = models.TextField(blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["queued", "running", "done", "stopped", "failed", "cancelled"]),
                name="behaviour_search_state",
            ),
        ]

    def __str__(self) -> str:
        return self.description[:60]


class BehaviourGroup(models.Model):
    """A cluster of a behaviour search's quotes (TF-IDF + k-means), named by its top terms until a
    person names it."""

    search = models.ForeignKey(BehaviourSearch, on_delete=models.CASCADE, related_name="groups")
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=120)
    terms = models.JSONField(default=list)

    class Meta:
        ordering = ["search", "number"]
        constraints = [models.UniqueConstraint(fields=["search", "number"], name="behaviour_group_unique")]

    def __str__(self) -> str:
        return self.name


class BehaviourHit(models.Model):
    """One trace the judge read: whether the behaviour is there, how sure, and the quoted steps
    (each checked against the step's text: ``found`` false when the quote is not in it)."""

    search = models.ForeignKey(BehaviourSearch, on_delete=models.CASCADE, related_name="hits")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="+")
    present = models.BooleanField(default=False)
    score = models.FloatField(default=0)
    quotes = models.JSONField(default=list)  # [{"step": n, "quote": "...", "found": bool}]
    explanation = models.TextField(blank=True)
    error = models.TextField(blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    group = models.ForeignKey(BehaviourGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="hits")

    class Meta:
        ordering = ["search", "-score", "trace"]
        constraints = [models.UniqueConstraint(fields=["search", "trace"], name="behaviour_hit_unique")]

    def __str__(self) -> str:
        return f"{self.trace_id}: {self.score:.2f}"
