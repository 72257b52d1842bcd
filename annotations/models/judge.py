"""LLM pre-labelling: prompt templates, judge runs, one item per trace, and the answer cache.

A run freezes its trace selection as a list of ids at creation; each item is labelled at most
once (UniqueConstraint on (run, trace) and on the resulting annotation). A run's key comes from
its connection (stored encrypted, or an environment variable) or names an environment variable.
"""

from django.conf import settings
from django.db import models


class PromptTemplate(models.Model):
    """The judge prompt for a taxonomy version. Editing creates a new version (number + 1)."""

    taxonomy_version = models.ForeignKey(
        "taxonomy.TaxonomyVersion", on_delete=models.PROTECT, related_name="prompt_templates"
    )
    number = models.PositiveIntegerField()
    text = models.TextField()
    notes = models.CharField(max_length=300, blank=True)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["taxonomy_version", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy_version", "number"], name="prompt_template_unique_number"),
            models.UniqueConstraint(
                fields=["taxonomy_version"], condition=models.Q(is_active=True), name="prompt_template_one_active"
            ),
        ]

    def __str__(self) -> str:
        return f"prompt v{self.number}"


class ProviderConnection(models.Model):
    """A project's way to reach an LLM server: base URL, models, prices, and its key.

    The key is either stored encrypted (``key_encrypted``: Fernet, keyed from settings; see
    ``annotations/judge/secrets.py``) or named as an environment variable of the worker
    (``key_env``, limited by MAST_JUDGE_API_KEYS). It is never shown back, logged or exported.
    """

    class Preset(models.TextChoices):
        CUSTOM = "custom", "Custom OpenAI-compatible server"
        OPENAI = "openai", "OpenAI"
        VLLM = "vllm", "vLLM (local)"
        OLLAMA = "ollama", "Ollama (local)"
        LITELLM = "litellm", "LiteLLM proxy (local)"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="judge_connections")
    name = models.CharField(max_length=100)
    preset = models.CharField(max_length=10, choices=Preset.choices, default=Preset.CUSTOM)
    base_url = models.CharField(max_length=500)
    models_list = models.JSONField(default=list, blank=True, help_text="Model names offered on the run form.")
    key_encrypted = models.TextField(blank=True)
    key_env = models.CharField(max_length=100, blank=True)
    key_hint = models.CharField(max_length=12, blank=True, help_text="The key's last 4 characters.")
    price_in = models.DecimalField(max_digits=10, decimal_places=4, default=0, help_text="Cost per 1M input tokens.")
    price_out = models.DecimalField(max_digits=10, decimal_places=4, default=0, help_text="Cost per 1M output tokens.")
    # Per model, what its server refused ({"o1-mini": ["system_role", "max_tokens", ...]}, the
    # JudgeRun.dropped_params values in the order learned): a new run of that model starts in that form.
    adaptations = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_connection_unique_name"),
            models.CheckConstraint(
                condition=~(~models.Q(key_encrypted="") & ~models.Q(key_env="")), name="judge_connection_one_key"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def key_source(self) -> str:
        if self.key_encrypted:
            return f"stored (…{self.key_hint})" if self.key_hint else "stored"
        if self.key_env:
            return f"environment variable {self.key_env}"
        return "none"


class JudgeRun(models.Model):
    class Provider(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible chat completions"
        MAST = "mast", "MAST official judge (agentdash prompt and parser)"
        BASELINE = "baseline", "Baseline classifier (TF-IDF + logistic regression)"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused (cancelled)"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="judge_runs")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # The NAME of an environment variable holding the key, never the key itself.
    api_key_env = models.CharField(max_length=100, blank=True)
    # Or a connection of the project (its stored key goes only to its own base URL).
    connection = models.ForeignKey(
        ProviderConnection, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=2000)
    timeout = models.FloatField(default=120.0, help_text="Seconds per HTTP request.")
    prompt = models.ForeignKey(PromptTemplate, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    taxonomy_version = models.ForeignKey("taxonomy.TaxonomyVersion", on_delete=models.PROTECT, related_name="+")
    few_shot = models.BooleanField(default=False)
    # Off: every trace is sent to the model even where the cache holds an answer for the same
    # model, prompt and parameters, so a re-run is a second draw (the judge's self-agreement).
    use_cache = models.BooleanField(
        default=True,
        help_text="Answer a trace from the cache when the same model, prompt and parameters answered it before.",
    )
    # {"kind": "all"|"unlabelled"|"round"|"filter", "round": id, "filter": {...}}
    selection = models.JSONField(default=dict, blank=True)
    trace_ids = models.JSONField(default=list, blank=True)
    concurrency = models.PositiveIntegerField(default=4)
    budget_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    budget_cost = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    price_in = models.DecimalField(max_digits=10, decimal_places=4, default=0, help_text="Cost per 1M input tokens.")
    price_out = models.DecimalField(max_digits=10, decimal_places=4, default=0, help_text="Cost per 1M output tokens.")
    # None until known: whether the server accepts response_format={"type": "json_object"}.
    json_mode = models.BooleanField(null=True, blank=True)
    # What the server refused with a 400 ("temperature", "system_role", ...; providers/base.ADAPTATIONS):
    # left out or sent in the form it takes, for the rest of the run. Starts as its connection's record.
    dropped_params = models.JSONField(default=list, blank=True)
    # Before the start: {"traces", "chars", "tokens_in", "tokens_out", "cost"} from the traces' sizes.
    estimate = models.JSONField(default=dict, blank=True)
    # Frozen at creation: {"max_chars": int, "few_shot": [{"trace_id", "excerpt", "present", "codes"}]}.
    prompt_extras = models.JSONField(default=dict, blank=True)
    # Baseline: what it was trained on and its held-out quality.
    baseline_info = models.JSONField(default=dict, blank=True)
    rater = models.ForeignKey(
        "annotations.Rater", null=True, blank=True, on_delete=models.PROTECT, related_name="judge_runs"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    error = models.TextField(blank=True)
    n_total = models.PositiveIntegerField(default=0)
    n_done = models.PositiveIntegerField(default=0)
    n_failed = models.PositiveIntegerField(default=0)
    n_cached = models.PositiveIntegerField(default=0)
    n_truncated = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    tokens_reasoning = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["queued", "running", "paused", "done", "failed"]),
                name="judge_run_state_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(provider__in=["openai", "mast", "baseline"]), name="judge_run_provider_valid"
            ),
            models.CheckConstraint(condition=models.Q(concurrency__gte=1), name="judge_run_concurrency_positive"),
        ]

    def __str__(self) -> str:
        return f"judge run {self.pk} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    @property
    def n_remaining(self) -> int:
        return max(0, self.n_total - self.n_done - self.n_failed)

    @property
    def percent(self) -> int:
        return int(100 * (self.n_done + self.n_failed) / self.n_total) if self.n_total else 100

    @property
    def title(self) -> str:
        """How lists and pages name the run when no rater name is shown: the baseline as the
        baseline (it has no LLM model, whatever a form sent), an LLM run by its model."""
        if self.provider == self.Provider.BASELINE:
            return "Baseline classifier"
        return self.model or self.get_provider_display()


class JudgeItem(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="items")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="judge_items")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    # A running item belongs to whoever claimed it until then; past it, a sweep re-enqueues it.
    lease_until = models.DateTimeField(null=True, blank=True)
    # Incremented at each claim and carried by the task: a stale duplicate task sees another number and exits.
    claim = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    raw_answer = models.TextField(blank=True)
    parsed = models.JSONField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    tokens_reasoning = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    cached = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    truncated = models.BooleanField(default=False)
    truncation = models.JSONField(default=dict, blank=True)
    # The rater's annotation of the trace (a later run of the same model + prompt updates the same one).
    annotation = models.ForeignKey(
        "annotations.Annotation", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_items"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "trace"], name="judge_item_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "running", "done", "failed"]),
                name="judge_item_state_valid",
            ),
        ]
        indexes = [models.Index(fields=["run", "state"], name="judge_item_run_state")]

    def __str__(self) -> str:
        return f"item {self.pk} ({self.state})"


class JudgeCache(models.Model):
    """(trace content hash, prompt version, model, parameters) -> the answer: a re-run costs nothing."""

    key = models.CharField(max_length=64, unique=True)
    content_hash = models.CharField(max_length=64)
    # None for a provider that builds its own prompt (the MAST official judge: its identity is in params_hash).
    prompt = models.ForeignKey(PromptTemplate, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=200)
    params_hash = models.CharField(max_length=64)
    raw_answer = models.TextField()
    parsed = models.JSONField()
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"cache {self.key[:10]}"


class LivePolicy(models.Model):
    """What happens to each new live trace of a project (annotations.judge.live): a uniformly random
    share is judged by one connection's model within a daily budget, and an independent uniformly
    random share goes to the human round's queues (the sample the corrected shares use)."""

    project = models.OneToOneField("traces.Project", on_delete=models.CASCADE, related_name="live_policy")
    active = models.BooleanField(default=True)
    connection = models.ForeignKey(ProviderConnection, on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=200)
    judge_share = models.FloatField(default=1.0)
    human_share = models.FloatField(default=0.1)
    human_round = models.ForeignKey(
        "annotations.Round", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="An open round whose annotators get the human sample in their queues.",
    )  # fmt: skip
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    daily_cost = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(judge_share__gte=0, judge_share__lte=1, human_share__gte=0, human_share__lte=1),
                name="live_policy_shares",
            ),
        ]


class LiveDraw(models.Model):
    """The live policy's draws for one new trace: judged or not (and why not), in the human sample
    or not. The human sample's traces are the ones corrected shares of live data use."""

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="live_draws")
    trace = models.OneToOneField("traces.Trace", on_delete=models.CASCADE, related_name="live_draw")
    drawn_at = models.DateTimeField(auto_now_add=True)
    judge = models.BooleanField()  # drawn for the judge
    human = models.BooleanField()  # drawn for the human sample
    run = models.ForeignKey(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    skipped = models.CharField(max_length=200, blank=True)  # drawn for the judge but not judged: why

    class Meta:
        indexes = [models.Index(fields=["project", "human"], name="live_draw_sample")]
