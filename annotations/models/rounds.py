"""Calibration rounds: who labels which traces with which taxonomy version, and the consensus."""

from django.conf import settings
from django.db import models


class Round(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open (blind labelling)"
        REVIEW = "review", "Review"
        CLOSED = "closed", "Closed"

    class Kind(models.TextChoices):
        MODES = "modes", "Failure modes"
        ATTRIBUTION = "attribution", "Failure attribution"

    project = models.ForeignKey("traces.Project", on_delete=models.CASCADE, related_name="rounds")
    name = models.CharField(max_length=200)
    taxonomy_version = models.ForeignKey("taxonomy.TaxonomyVersion", on_delete=models.PROTECT, related_name="rounds")
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    kind = models.CharField(
        max_length=12,
        choices=Kind.choices,
        default=Kind.MODES,
        help_text="What the round measures. Failure modes: the mode labels' agreement (and the attribution's, "
        "where annotators attribute). Failure attribution: who and when; the mode labels are context and "
        "stay out of the failure-mode agreement trend.",
    )
    # {"method": "manual"|"random"|"stratified", "n": int, "seed": int, "strata": [...]}
    sampling = models.JSONField(default=dict, blank=True)
    reveal_in_review = models.BooleanField(
        default=True,
        help_text="Once in review, annotators of the round may see each other's labels.",
    )
    closed_with_majority = models.BooleanField(default=False)
    makes_working_version = models.BooleanField(
        default=False,
        help_text="Opening the round makes its (newer) taxonomy version the project's working version.",
    )
    imported_from = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    review_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    annotators = models.ManyToManyField(settings.AUTH_USER_MODEL, through="RoundAnnotator", related_name="rounds")
    traces = models.ManyToManyField("traces.Trace", through="RoundTrace", related_name="rounds")

    class Meta:
        ordering = ["project", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="round_name_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=["draft", "open", "review", "closed"]),
                name="round_state_valid",
            ),
            models.CheckConstraint(condition=models.Q(kind__in=["modes", "attribution"]), name="round_kind_valid"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def title(self) -> str:
        """How sentences name the round: "Round 3 (real traces)", never "Round Round 3 ..." (most
        rounds are named "Round N"); other names are quoted: Round “Pilot”."""
        return self.name if self.name.lower().startswith("round") else f"Round “{self.name}”"

    @property
    def is_blind(self) -> bool:
        return self.state in (self.State.DRAFT, self.State.OPEN)


class RoundAnnotator(models.Model):
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="round_annotators")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "user"], name="round_annotator_unique"),
        ]


class RoundTrace(models.Model):
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="round_traces")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="round_traces")
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["round", "order"]
        constraints = [
            models.UniqueConstraint(fields=["round", "trace"], name="round_trace_unique"),
        ]


class Adjudication(models.Model):
    """The consensus decision for one (trace, mode) of a round."""

    class Decision(models.TextChoices):
        PRESENT = "present", "Present"
        ABSENT = "absent", "Absent"

    class Basis(models.TextChoices):
        UNANIMOUS = "unanimous", "Unanimous"
        ADJUDICATED = "adjudicated", "Adjudicated"
        MAJORITY = "majority", "Majority vote"

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="adjudications")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="adjudications")
    mode = models.ForeignKey("taxonomy.FailureMode", on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    basis = models.CharField(max_length=12, choices=Basis.choices)
    note = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["round", "trace", "mode__order"]
        constraints = [
            models.UniqueConstraint(fields=["round", "trace", "mode"], name="adjudication_unique"),
            models.CheckConstraint(
                condition=models.Q(decision__in=["present", "absent"]), name="adjudication_decision"
            ),
        ]


class DisagreementComment(models.Model):
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="comments")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="+")
    mode = models.ForeignKey("taxonomy.FailureMode", on_delete=models.PROTECT, related_name="+")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]


class AgreementReport(models.Model):
    """A computed agreement report, stored so the report page is fast; recomputed on label change."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="reports")
    # Which raters were in it: "humans" (the default headline) or "humans+<rater ids>".
    rater_set = models.CharField(max_length=200, default="humans")
    fingerprint = models.CharField(max_length=64)
    data = models.JSONField()
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["round", "rater_set"], name="agreement_report_unique"),
        ]


class LabelsStamp(models.Model):
    """A number that changes whenever the project's agreed labels may have changed: bumped by
    database triggers (migration 0010) on every INSERT, UPDATE or DELETE of an ``Adjudication``
    or a ``Round`` of the project, whatever wrote it (services, admin, imports, COPY). Caches of
    agreed-label figures key on it instead of aggregating every adjudication per request.
    No code writes it; readers use ``annotations.rounds.agreed.agreed_labels_stamp``."""

    # no FK constraint: a project's deletion removes rounds (the triggers then touch this row)
    # after Django has collected the dependents, and an orphan stamp is harmless
    project = models.OneToOneField(
        "traces.Project", primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    version = models.BigIntegerField(default=0)


class AgreedMask(models.Model):
    """One (round, trace)'s consensus folded into bit masks: the input of the agreed-labels fold
    (``annotations.rounds.agreed``), so a cold dashboard reads one small row per (round, trace)
    instead of aggregating every adjudication.

    Maintained only by PostgreSQL triggers (migration 0012), never by code: any write to
    ``annotations_adjudication`` (services, admin, imports, COPY, cascades) recomputes the
    (round, trace) pairs it touched from the adjudication rows; a change to a version's modes or
    to a round's version recomputes the rounds concerned. The round's state is not in the row
    (closing or reopening a round changes nothing here): readers pick the closed rounds.

    Bit i of each mask is the i-th mode of the round's taxonomy version **in id order**
    (``agreed_mask_layout``), not display order, so editing a mode's code, order or category
    leaves the bits alone. ``known``: the modes decided; ``present``/``unanimous``/``majority``:
    those decided present / with that basis. The tests check it against the adjudications folded
    from scratch (``agreed_label_masks``, tests/annotations/rounds/test_agreed_masks.py)."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="+")
    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="+")
    present = models.BigIntegerField()
    known = models.BigIntegerField()
    unanimous = models.BigIntegerField()
    majority = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["round", "trace"], name="agreed_mask_unique")]
