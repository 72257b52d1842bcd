"""Serializers of the release API: nested Input/Output shapes, no business rules."""

from rest_framework import serializers

from annotations.models import Release, ReleaseFile
from annotations.releases import writers


class ReleaseFileOut(serializers.ModelSerializer):
    class Meta:
        model = ReleaseFile
        fields = ["name", "kind", "size_bytes", "sha256"]


class ReleaseOut(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    taxonomy_version = serializers.CharField(source="taxonomy_version.label")
    round = serializers.CharField(source="round.name", allow_null=True, default=None)
    # A plain string (not an enum) so the schema's "status" enums of other areas do not collide.
    status = serializers.CharField(help_text="queued, running, done (published) or failed")
    selection = serializers.CharField(help_text="agreed, round or filter")
    percent = serializers.IntegerField()
    files = ReleaseFileOut(many=True)

    class Meta:
        model = Release
        fields = [
            "number",
            "title",
            "status",
            "percent",
            "n_traces",
            "n_mapped",
            "taxonomy_version",
            "selection",
            "round",
            "filters",
            "options",
            "created_by",
            "created_at",
            "finished_at",
            "error",
            "attempts",
            "files",
        ]


class ReleaseDetailOut(ReleaseOut):
    class Meta(ReleaseOut.Meta):
        fields = [*ReleaseOut.Meta.fields, "notes", "manifest"]


class ReleaseOptionsIn(serializers.Serializer):
    majority = serializers.BooleanField(default=False, help_text="Majority vote where no adjudication (flagged).")
    raters = serializers.BooleanField(default=True, help_text="Each rater's own labels (people pseudonymised).")
    judge = serializers.BooleanField(
        default=True, help_text="Judge labels: the LLM judges' and the offline baseline's."
    )
    evidence = serializers.BooleanField(default=True, help_text="Evidence steps and rationales.")
    trace_text = serializers.BooleanField(default=True, help_text="Trace text; otherwise references only.")
    formats = serializers.ListField(
        child=serializers.ChoiceField(choices=list(writers.FORMATS)), default=list(writers.FORMATS)
    )


class ReleaseFiltersIn(serializers.Serializer):
    mas_name = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    llm_name = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    benchmark = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)


class ReleaseIn(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    notes = serializers.CharField(required=False, allow_blank=True, default="")
    selection = serializers.ChoiceField(choices=Release.Selection.choices, default="agreed")
    round = serializers.IntegerField(required=False, allow_null=True, help_text="Round id for selection=round.")
    taxonomy_version = serializers.IntegerField(
        required=False, allow_null=True, help_text="Taxonomy version id; default: the project's."
    )
    filters = ReleaseFiltersIn(required=False)
    options = ReleaseOptionsIn(required=False)
