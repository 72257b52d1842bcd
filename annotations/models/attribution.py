"""Failure attribution: which step decided the failure, which agent took it, and the round's consensus.

A rater's attribution is part of their annotation (one row per annotation, or none when the rater
did not attribute), so the blind rule that hides an annotation hides its attribution with it.
``decisive_step`` is a step *index* of the trace (``traces.Step.index``), as Who&When's
``mistake_step`` is an index into ``history``.
"""

from django.conf import settings
from django.db import models

SEVERITIES = ("low", "medium", "high")


class Attribution(models.Model):
    """One rater's decisive step / responsible agent for one annotation (see README "Failure attribution")."""

    annotation = models.OneToOneField("annotations.Annotation", on_delete=models.CASCADE, related_name="attribution")
    # Exactly one of: a decisive step, or "no single decisive step".
    decisive_step = models.PositiveIntegerField(null=True, blank=True)
    no_single_step = models.BooleanField(default=False)
    agent = models.CharField(max_length=200, blank=True)
    modes = models.JSONField(default=list, blank=True)  # mode codes of the annotation's version
    reason = models.TextField(blank=True)
    # Further located errors in TRAIL's sense: [{"step", "mode", "severity", "category", "note"}].
    errors = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            # People give a step or "no single step" (labels.attribution checks it); an imported
            # source may give neither (TRAIL locates errors but names no decisive step), never both.
            models.CheckConstraint(
                condition=~models.Q(no_single_step=True, decisive_step__isnull=False),
                name="attribution_step_or_none",
            ),
        ]

    def __str__(self) -> str:
        return "no single step" if self.no_single_step else f"step {self.decisive_step} ({self.agent})"


class AttributionDecision(models.Model):
    """The consensus attribution of one trace in a round (like ``Adjudication`` for a mode)."""

    class Basis(models.TextChoices):
        UNANIMOUS = "unanimous", "Unanimous"
        ADJUDICATED = "adjudicated", "Adjudicated"
        MAJORITY = "majority", "Majority vote"

    round = models.ForeignKey("annotations.Round", on_delete=models.CASCADE, related_name="attribution_decisions")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="attribution_decisions")
    decisive_step = models.PositiveIntegerField(null=True, blank=True)
    no_single_step = models.BooleanField(default=False)
    agent = models.CharField(max_length=200, blank=True)
    modes = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    basis = models.CharField(max_length=12, choices=Basis.choices)
    note = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["round", "trace"]
        constraints = [
            models.UniqueConstraint(fields=["round", "trace"], name="attribution_decision_unique"),
            models.CheckConstraint(
                condition=(
                    models.Q(no_single_step=True, decisive_step__isnull=True)
                    | models.Q(no_single_step=False, decisive_step__isnull=False)
                ),
                name="attribution_decision_step_or_none",
            ),
            models.CheckConstraint(
                condition=models.Q(basis__in=["unanimous", "adjudicated", "majority"]),
                name="attribution_decision_basis",
            ),
        ]

    def __str__(self) -> str:
        return "no single step" if self.no_single_step else f"step {self.decisive_step} ({self.agent})"
