"""Projects and their members, traces and their steps, and import jobs."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Project(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    taxonomy_version = models.ForeignKey(
        "taxonomy.TaxonomyVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The taxonomy version annotators use by default in this project.",
    )
    reveal_suggestions = models.BooleanField(
        default=False,
        help_text="Outside rounds, show annotators non-human raters' labels as suggestions. "
        "Never applies to traces of an open round.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MANAGER = "manager", "Manager"
        ANNOTATOR = "annotator", "Annotator"
        VIEWER = "viewer", "Viewer"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique"),
            models.CheckConstraint(
                condition=models.Q(role__in=["manager", "annotator", "viewer"]),
                name="membership_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


class Trace(models.Model):
    class Outcome(models.TextChoices):
        SUCCESS = "success", "Succeeded"
        FAILURE = "failure", "Failed"
        UNKNOWN = "", "Unknown"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="traces")
    mas_name = models.CharField("framework", max_length=100, blank=True, db_index=True)
    llm_name = models.CharField("LLM", max_length=100, blank=True, db_index=True)
    benchmark = models.CharField(max_length=100, blank=True, db_index=True)
    task = models.TextField(blank=True)
    external_id = models.CharField(max_length=300, blank=True, db_index=True)
    title = models.CharField(max_length=300, blank=True)
    format = models.CharField(max_length=40)
    raw_text = models.TextField()
    size_bytes = models.PositiveBigIntegerField()
    content_hash = models.CharField(max_length=64)
    metadata = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True, default="")
    # Statistics computed at import, used by filters, sampling and analytics.
    n_steps = models.PositiveIntegerField(default=0)
    n_agents = models.PositiveIntegerField(default=0)
    n_agent_switches = models.PositiveIntegerField(default=0)
    n_chars = models.PositiveBigIntegerField(default=0)
    n_lines = models.PositiveIntegerField(default=0)
    n_repeated_steps = models.PositiveIntegerField(default=0)
    agents = models.JSONField(default=list, blank=True)
    import_job = models.ForeignKey("ImportJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="traces")
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "content_hash"], name="trace_unique_content"),
            models.CheckConstraint(
                condition=models.Q(outcome__in=["success", "failure", ""]), name="trace_outcome_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["project", "-id"], name="trace_project_recent"),
            # the list's filter choices (one DISTINCT per page view) read this index, not the table
            models.Index(fields=["project", "mas_name", "llm_name", "benchmark"], name="trace_project_facets"),
            # the analytics dashboard's columns of every trace (an index-only scan of a few MB,
            # not the table with its text: 130 MB at 100,000 traces of 1 KB)
            models.Index(
                fields=["project", "id"],
                include=[
                    "mas_name",
                    "llm_name",
                    "benchmark",
                    "n_steps",
                    "n_agent_switches",
                    "n_repeated_steps",
                    "outcome",
                ],
                name="trace_project_dashboard",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id or f"trace {self.pk}"

    @property
    def display_name(self) -> str:
        return self.title or self.external_id or f"Trace #{self.pk}"


class TracesStamp(models.Model):
    """A number that changes whenever one of the project's trace rows is edited in place: bumped
    by database triggers (migration 0012) on every UPDATE of ``traces_trace``, whatever wrote it
    (admin, shell, SQL). Imports only insert and deletions only delete, which the traces' count
    and highest id already show, so they pay nothing. Caches of what depends on trace rows (the
    dashboard's trace columns, the filter choices) key on count, highest id and this number
    (``annotations.analytics.selectors.project_trace_facts``). No code writes it."""

    # no FK constraint, as LabelsStamp: an orphan stamp is harmless
    project = models.OneToOneField(
        Project, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    version = models.BigIntegerField(default=0)


class Step(models.Model):
    class Kind(models.TextChoices):
        MESSAGE = "message", "Message"
        TOOL_CALL = "tool_call", "Tool call"
        TOOL_OUTPUT = "tool_output", "Tool output"
        SYSTEM = "system", "System"
        LOG = "log", "Log"

    # No index of its own: step_unique_index (trace, index) leads with the trace and serves every
    # lookup by trace; a second one cost every imported step another B-tree insert.
    # No foreign key constraint in the database (migration 0022): its check ran for every step, a
    # query and a row lock on the trace, ~37% of PostgreSQL's CPU in a MAST-Data import
    # (bench/README.md). Steps are written by the importer only (traces.importing.writer), in the
    # transaction that inserts their trace just before, with the ids it reserved; traces are
    # deleted through the ORM, whose CASCADE deletes their steps (tests pin both).
    trace = models.ForeignKey(
        Trace, on_delete=models.CASCADE, related_name="steps", db_index=False, db_constraint=False
    )
    index = models.PositiveIntegerField()
    agent = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.MESSAGE)
    content = models.TextField()
    line_start = models.PositiveIntegerField()
    line_end = models.PositiveIntegerField()
    # What the format says beyond the text, only the keys it gives (ParsedStep.details): "model",
    # "input_tokens", "output_tokens", "timestamp" (as written), "duration_ms".
    details = models.JSONField(default=dict, blank=True)
    # Span-based formats keep their tree: the index of the parent step (an earlier step of the same
    # trace), e.g. agent invocation -> LLM answer -> tool call -> tool output. Null at the top and
    # in flat formats. Model, tokens and timing are what the span said (empty when it said nothing).
    parent_index = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=100, blank=True, default="", db_default="")  # COPY of flat traces omits it
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    # Whom the step addresses, where the format names it (ParsedStep.recipient); "" otherwise
    # (the COPY of steps without one omits the column).
    recipient = models.CharField(max_length=200, blank=True, default="", db_default="")
    # In the corpus search's indexes (partial trigram and word indexes WHERE searchable): written false and
    # turned true by traces.search.indexing after the import, which keeps the index off its path.
    searchable = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["trace", "index"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "index"], name="step_unique_index"),
            models.CheckConstraint(condition=models.Q(line_end__gte=models.F("line_start")), name="step_lines_ordered"),
            models.CheckConstraint(
                condition=models.Q(parent_index__isnull=True) | models.Q(parent_index__lt=models.F("index")),
                name="step_parent_before",
            ),
        ]

    TREE_FIELDS = ("parent_index", "model", "input_tokens", "output_tokens", "started_at", "duration_ms")

    def __str__(self) -> str:
        return f"step {self.index} ({self.agent})"


class SearchWord(models.Model):
    """The corpus search's vocabulary: every word (``step_words``) of a searchable step, of any
    project, once. A regular expression (or prefix) whose matches are made of word characters only
    looks its words up here first (a trigram index over a few million short words), then the steps
    holding one of them in the word index; words of steps since deleted stay (a word with no step
    finds none). Written by the indexer with the steps it makes searchable (``traces/search/indexing.py``)."""

    word = models.TextField(primary_key=True)

    def __str__(self) -> str:
        return self.word


class TraceSource(models.Model):
    """Another record whose trace text equals a stored trace's (traces.importing.merge): its own
    identity and the labels that came with it, kept instead of dropped as a duplicate. The trace
    row holds the identity of the record that was imported first."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="sources")
    external_id = models.CharField(max_length=300, blank=True)
    mas_name = models.CharField("framework", max_length=100, blank=True)
    llm_name = models.CharField("LLM", max_length=100, blank=True)
    benchmark = models.CharField(max_length=100, blank=True)
    source_file = models.CharField(max_length=500, blank=True)
    record_number = models.PositiveIntegerField(null=True, blank=True)  # 0-based, as in ImportJob.report
    # The record's own labels ({"1.1": 0|1|null}), never shown while they could reveal a rater's labels.
    labels = models.JSONField(default=dict, blank=True)
    import_job = models.ForeignKey(
        "ImportJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged_sources"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trace", "id"]

    def __str__(self) -> str:
        return f"source {self.external_id or self.pk} of trace {self.trace_id}"


class ImportJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Failure(models.TextChoices):
        NONE = "", "Not failed"
        REFUSED = "refused", "The upload was refused"  # bad file, over a limit: deleted, retrying cannot help
        STOPPED = "stopped", "The import stopped"  # the worker died, an internal error: kept for a retry

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    failure = models.CharField(max_length=10, choices=Failure.choices, blank=True, default="")
    # Liveness (traces/jobs.py): attempts started, and when the task was last sent.
    attempts = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField(default=timezone.now)
    format = models.CharField(max_length=40, default="auto")
    # "import the rest": JSONL lines that are not JSON are skipped and listed in the report
    # instead of refusing the import (traces_import(import_rest=True)).
    import_rest = models.BooleanField(default=False)
    upload_dir = models.CharField(max_length=500, blank=True)  # a folder in the storage: imports/<id>
    file_names = models.JSONField(default=list, blank=True)
    bytes_total = models.PositiveBigIntegerField(default=0)
    bytes_done = models.PositiveBigIntegerField(default=0)
    n_imported = models.PositiveIntegerField(default=0)
    n_duplicates = models.PositiveIntegerField(default=0)
    n_merged = models.PositiveIntegerField(default=0)
    # One line per file: what it became or why it was refused (traces.importing.report.FileLine).
    report = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(failure__in=["", "refused", "stopped"]), name="import_job_failure_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return int(100 * self.bytes_done / self.bytes_total) if self.bytes_total else 0

    @property
    def can_retry(self) -> bool:
        """Failed for a reason other than its input, and the upload is still kept."""
        return self.status == self.Status.FAILED and self.failure == self.Failure.STOPPED and bool(self.upload_dir)


class IngestKey(models.Model):
    """A project's key for the OTLP receiver (traces.live): stored as its SHA-256, found by its
    prefix, shown once when created, revoked (never deleted: the ingest log names it)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingest_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class LiveTrace(models.Model):
    """A trace whose spans arrive through the OTLP receiver: assembled into a ``Trace`` once its root
    span has ended and no span came for the quiet period (traces.live.assembly)."""

    class State(models.TextChoices):
        OPEN = "open", "Receiving"
        ASSEMBLED = "assembled", "Assembled"
        FAILED = "failed", "Could not be read"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="live_traces")
    otel_trace_id = models.CharField(max_length=32)  # hex, as OTLP/JSON writes it
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    n_spans = models.PositiveIntegerField(default=0)
    first_span_at = models.DateTimeField()
    last_span_at = models.DateTimeField()
    root_ended = models.BooleanField(default=False)
    assembled_at = models.DateTimeField(null=True, blank=True)
    # a span came after the trace was labelled: kept, the trace itself not rewritten
    changed_after_labelling = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "otel_trace_id"], name="live_trace_once"),
            models.CheckConstraint(
                condition=models.Q(state__in=["open", "assembled", "failed"]), name="live_trace_state"
            ),
        ]
        indexes = [models.Index(fields=["state", "last_span_at"], name="live_trace_due")]


class LiveSpan(models.Model):
    """One span as received (OTLP/JSON shape, ids in hex, with its resource and scope), stored
    before the receiver answers; a resent span (same trace and span id) is not stored twice."""

    live = models.ForeignKey(LiveTrace, on_delete=models.CASCADE, related_name="spans")
    span_id = models.CharField(max_length=16)
    received_at = models.DateTimeField()
    body = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["live", "span_id"], name="live_span_once")]


class IngestStat(models.Model):
    """What the OTLP receiver took for a project in one hour: requests, spans acknowledged, new and
    rejected, and the reasons (traces.live.stats)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingest_stats")
    hour = models.DateTimeField()
    requests = models.PositiveIntegerField(default=0)
    refused_requests = models.PositiveIntegerField(default=0)  # 400, 413, 429 on a valid key
    spans_accepted = models.PositiveBigIntegerField(default=0)
    spans_new = models.PositiveBigIntegerField(default=0)  # the rest were resent: stored before
    spans_rejected = models.PositiveBigIntegerField(default=0)
    reasons = models.JSONField(default=dict, blank=True)  # reason -> spans or requests

    class Meta:
        ordering = ["project", "-hour"]
        constraints = [models.UniqueConstraint(fields=["project", "hour"], name="ingest_stat_hour")]
