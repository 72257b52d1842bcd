"""Alert rules on a project's failure shares, the webhooks they notify, what fired and each delivery
try (annotations.monitoring.alerts evaluates and delivers)."""

from django.conf import settings
from django.db import models


class AlertRule(models.Model):
    class Kind(models.TextChoices):
        LEVEL = "level", "Share above a level"
        BASELINE = "baseline", "Significantly above a baseline window"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # a mode or category code of the project's working version, or "*" for every mode (baseline
    # rules only: the p-values are adjusted across the modes, Holm)
    target = models.CharField(max_length=10)
    level = models.FloatField(null=True, blank=True, help_text="LEVEL rules: fires when the share is above this (0-1).")
    window_days = models.PositiveIntegerField(default=7)
    baseline_days = models.PositiveIntegerField(default=28, help_text="BASELINE rules: the window before the window.")
    alpha = models.FloatField(default=0.05, help_text="BASELINE rules: after adjusting across the tested modes.")
    min_traces = models.PositiveIntegerField(default=20, help_text="No verdict on fewer labelled traces in the window.")
    source = models.CharField(max_length=40, default="agreed", help_text="agreed, a rater id or corrected:<judge id>.")
    cohort = models.CharField(max_length=500, blank=True, help_text="Only these traces (an experiment's cohort text).")
    active = models.BooleanField(default=True)
    # codes above their level or baseline at the last evaluation: a code fires when it enters
    firing = models.JSONField(default=list, blank=True)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=["level", "baseline"]), name="alert_rule_kind"),
            models.CheckConstraint(
                condition=~models.Q(kind="level") | models.Q(level__gte=0, level__lte=1), name="alert_rule_level"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Webhook(models.Model):
    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    # the HMAC key, encrypted at rest as the judge connections' API keys are (annotations.judge.secrets);
    # shown once when the hook is created, never again (``secret_prefix`` tells hooks apart)
    secret = models.CharField(max_length=400)
    secret_prefix = models.CharField(max_length=20)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "url"]

    def __str__(self) -> str:
        return self.url


class AlertEvent(models.Model):
    """A rule's code crossing its level or baseline (one per crossing), until it comes back."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="events")
    code = models.CharField(max_length=10)
    fired_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField()
    figures = models.JSONField(default=dict)  # the window's share, interval, n; baseline and p-values

    class Meta:
        ordering = ["-fired_at", "-id"]


class WebhookDelivery(models.Model):
    """One try of sending one event to one hook: what was sent back, or why it failed."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        RETRYING = "retrying", "Failed, will retry"
        FAILED = "failed", "Failed, gave up"

    event = models.ForeignKey(AlertEvent, on_delete=models.CASCADE, related_name="deliveries")
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    attempt = models.PositiveIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    due_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    response = models.TextField(blank=True)  # the first 500 characters of the answer
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-due_at", "-id"]
        indexes = [models.Index(fields=["state", "due_at"], name="delivery_due")]
        constraints = [
            models.UniqueConstraint(fields=["event", "webhook", "attempt"], name="delivery_attempt_once"),
        ]
