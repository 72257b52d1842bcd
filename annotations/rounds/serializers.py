"""Serializers of the rounds API: Input shapes the views parse, Output shapes they return."""

from __future__ import annotations

from rest_framework import serializers

from annotations.models import Adjudication, DisagreementComment, Round
from annotations.rounds.sampling import SAMPLING_METHODS, STRATA_FIELDS


class RoundOut(serializers.ModelSerializer):
    taxonomy_version = serializers.IntegerField(source="taxonomy_version_id")
    taxonomy_version_label = serializers.CharField(source="taxonomy_version.label")
    project = serializers.CharField(source="project.slug")
    n_traces = serializers.IntegerField(allow_null=True)
    n_annotators = serializers.IntegerField(allow_null=True)
    n_submitted = serializers.IntegerField(allow_null=True)
    headline_kappa = serializers.FloatField(
        allow_null=True, help_text="Mean pairwise Cohen's kappa of the stored human report (null before review)."
    )

    class Meta:
        model = Round
        fields = [
            "id",
            "project",
            "name",
            "state",
            "kind",
            "taxonomy_version",
            "taxonomy_version_label",
            "sampling",
            "reveal_in_review",
            "closed_with_majority",
            "imported_from",
            "n_traces",
            "n_annotators",
            "n_submitted",
            "headline_kappa",
            "created_at",
            "opened_at",
            "review_at",
            "closed_at",
        ]


class RoundCreateIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    taxonomy_version = serializers.IntegerField(help_text="Id of a taxonomy version (a draft is published on opening).")
    annotators = serializers.ListField(child=serializers.CharField(), min_length=2, help_text="Usernames.")
    method = serializers.ChoiceField(choices=SAMPLING_METHODS, default="random")
    n = serializers.IntegerField(min_value=1, required=False, default=0)
    seed = serializers.IntegerField(required=False, default=0)
    stratify_by = serializers.ChoiceField(choices=list(STRATA_FIELDS), default="framework")
    trace_ids = serializers.ListField(child=serializers.IntegerField(), required=False, default=list)
    reveal_in_review = serializers.BooleanField(default=True)
    kind = serializers.ChoiceField(
        choices=Round.Kind.choices,
        default=Round.Kind.MODES,
        help_text="What the round measures: failure modes, or failure attribution (mode labels are context).",
    )


class RoundSampleIn(serializers.Serializer):
    method = serializers.ChoiceField(choices=SAMPLING_METHODS, default="random")
    n = serializers.IntegerField(min_value=1, required=False, default=0)
    seed = serializers.IntegerField(required=False, default=0)
    stratify_by = serializers.ChoiceField(choices=list(STRATA_FIELDS), default="framework")
    trace_ids = serializers.ListField(child=serializers.IntegerField(), required=False, default=list)


class RoundSampleTraceOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    framework = serializers.CharField()
    benchmark = serializers.CharField()
    llm = serializers.CharField()


class RoundSampleOut(serializers.Serializer):
    n = serializers.IntegerField()
    sampling = serializers.DictField(help_text="What the round would store in Round.sampling (strata counts included).")
    traces = RoundSampleTraceOut(many=True)


class RoundTransitionIn(serializers.Serializer):
    to = serializers.ChoiceField(choices=["open", "review", "closed"])
    with_majority = serializers.BooleanField(
        default=False, help_text="Closing: decide the remaining units by strict majority (ties refuse)."
    )
    force = serializers.BooleanField(default=False, help_text="Review: start although submissions are missing.")


class RoundAssignmentOut(serializers.Serializer):
    annotator = serializers.CharField()
    trace_id = serializers.IntegerField()
    state = serializers.CharField(help_text='"todo", "draft" or "submitted".')


class RoundRaterLabelOut(serializers.Serializer):
    username = serializers.CharField()
    decision = serializers.CharField(help_text='"present", "absent", "unsure", "" (no label) or "hidden" (blind).')
    evidence = serializers.ListField(child=serializers.DictField())
    rationale = serializers.CharField()


class RoundAdjudicationOut(serializers.ModelSerializer):
    trace_id = serializers.IntegerField()
    mode = serializers.CharField(source="mode.code")
    by = serializers.CharField(source="by.username", allow_null=True, default=None)

    class Meta:
        model = Adjudication
        fields = ["id", "trace_id", "mode", "decision", "basis", "note", "by", "at"]


class RoundCommentOut(serializers.ModelSerializer):
    trace_id = serializers.IntegerField()
    mode = serializers.CharField(source="mode.code")
    author = serializers.CharField(source="author.username")

    class Meta:
        model = DisagreementComment
        fields = ["id", "trace_id", "mode", "author", "body", "created_at"]


class RoundDisagreementOut(serializers.Serializer):
    trace_id = serializers.IntegerField(source="trace.pk")
    trace_title = serializers.CharField(source="trace.display_name")
    mode = serializers.CharField(source="mode.code")
    mode_name = serializers.CharField(source="mode.name")
    labels = RoundRaterLabelOut(many=True)
    majority = serializers.CharField(allow_null=True)
    adjudication = RoundAdjudicationOut(allow_null=True)
    comments = RoundCommentOut(many=True)


class RoundAdjudicationIn(serializers.Serializer):
    trace_id = serializers.IntegerField()
    mode = serializers.CharField(help_text="Mode code in the round's taxonomy version, e.g. 1.3.")
    decision = serializers.ChoiceField(choices=Adjudication.Decision.choices)
    note = serializers.CharField(required=False, allow_blank=True, default="")


class RoundCommentIn(serializers.Serializer):
    trace_id = serializers.IntegerField()
    mode = serializers.CharField()
    body = serializers.CharField()


class AgreedLabelOut(serializers.Serializer):
    trace_id = serializers.IntegerField()
    mode_code = serializers.CharField()
    taxonomy_version_id = serializers.IntegerField()
    decision = serializers.CharField()
    basis = serializers.CharField(help_text='"unanimous", "adjudicated", "majority", or "mapped" from another version')
    round_id = serializers.IntegerField(allow_null=True, help_text="null for labels carried onto the target version")
    note = serializers.CharField()


class RoundRefOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.CharField()
    taxonomy_version = serializers.CharField()


class AgreementReportOut(serializers.Serializer):
    """``annotations.rounds.agreement_report.round_report`` as stored, with the round it belongs to."""

    round = RoundRefOut()
    rater_set = serializers.CharField(help_text='"humans" (default headline) or "humans+<rater ids>".')
    computed_at = serializers.DateTimeField()
    raters = serializers.ListField(child=serializers.CharField())
    modes = serializers.ListField(child=serializers.CharField())
    n_traces = serializers.IntegerField()
    n_units = serializers.IntegerField()
    mean_pairwise_kappa = serializers.DictField(help_text="value, undefined, ci, ci_undefined, n_boot_defined, n_pairs")
    kappa_matrix = serializers.ListField(child=serializers.ListField(child=serializers.FloatField(allow_null=True)))
    pairwise = serializers.ListField(child=serializers.DictField())
    per_mode = serializers.ListField(child=serializers.DictField())
    per_category = serializers.ListField(child=serializers.DictField())
    overall = serializers.DictField()
    bootstrap = serializers.DictField()
