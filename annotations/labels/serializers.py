"""Input/output shapes of the workspace API. Business rules live in annotations.labels.services:
these serializers only check the JSON shape so the service can name the exact field it refuses."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotations.labels.attribution import attribution_as_dict
from traces.models import Trace


@extend_schema_field(OpenApiTypes.OBJECT)
class EvidenceField(serializers.JSONField):
    """``{"step": <step index>}`` or ``{"lines": [first, last]}`` (1-based, inclusive)."""


class LabelIn(serializers.Serializer):
    code = serializers.CharField(help_text="Mode code of the annotation's taxonomy version, e.g. 1.3.")
    decision = serializers.CharField(help_text="present | absent | unsure (unsure only in drafts).")
    evidence = serializers.ListField(child=EvidenceField(), required=False, default=list)
    rationale = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")


class LocatedErrorOut(serializers.Serializer):
    step = serializers.IntegerField()
    mode = serializers.CharField(allow_blank=True)
    severity = serializers.CharField(allow_blank=True, help_text="low | medium | high | empty")
    category = serializers.CharField(allow_blank=True)
    note = serializers.CharField(allow_blank=True)


class AttributionOut(serializers.Serializer):
    """The decisive step (a step index) or no_single_step, the responsible agent, its modes and why."""

    step = serializers.IntegerField(allow_null=True)
    no_single_step = serializers.BooleanField()
    agent = serializers.CharField(allow_blank=True)
    modes = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField(allow_blank=True)
    errors = LocatedErrorOut(many=True)


@extend_schema_field(AttributionOut(allow_null=True))
class AttributionField(serializers.JSONField):
    """Checked field by field in annotations.labels.attribution (errors name attribution.<field>)."""


class AnnotationIn(serializers.Serializer):
    revision = serializers.IntegerField(min_value=0, help_text="The revision this state was based on (0 if new).")
    labels = LabelIn(many=True, help_text="The whole state: modes not listed are undecided.")
    task_success = serializers.CharField(required=False, default="unknown", help_text="yes | no | unknown")
    notes = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    open_codes = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False, default=list
    )
    attribution = AttributionField(
        required=False, allow_null=True, default=None, help_text="The failure attribution, or null (not attributed)."
    )


def annotation_in_plain(data) -> dict | None:
    """``AnnotationIn``'s validated data for a body already in its exact shape, without DRF's field
    machinery (an autosave arrives every few seconds); None for anything else, which then goes
    through ``AnnotationIn`` for the same result or its field-by-field errors (a string revision,
    a number as a code, padded codes: whatever DRF would coerce or refuse)."""
    if not isinstance(data, dict):
        return None
    revision, labels = data.get("revision"), data.get("labels")
    if type(revision) is not int or revision < 0 or type(labels) is not list:
        return None
    clean = []
    for label in labels:
        if type(label) is not dict:
            return None
        code, decision = label.get("code"), label.get("decision")
        evidence, rationale = label.get("evidence", []), label.get("rationale", "")
        for text in (code, decision):
            if type(text) is not str or not text or text != text.strip():
                return None
        if type(evidence) is not list or type(rationale) is not str:
            return None
        clean.append({"code": code, "decision": decision, "evidence": evidence, "rationale": rationale})
    task_success, notes = data.get("task_success", "unknown"), data.get("notes", "")
    open_codes = data.get("open_codes", [])
    if type(task_success) is not str or not task_success or task_success != task_success.strip():
        return None
    if type(notes) is not str or type(open_codes) is not list or any(type(c) is not str for c in open_codes):
        return None
    texts = [
        task_success,
        notes,
        *open_codes,
        *(t for lab in clean for t in (lab["code"], lab["decision"], lab["rationale"])),
    ]
    if any("\x00" in t for t in texts):  # DRF's CharField refuses NUL characters
        return None
    out = {"revision": revision, "labels": clean, "task_success": task_success, "notes": notes}
    out["open_codes"] = list(open_codes)
    out["attribution"] = data.get("attribution")
    return out


class SubmitIn(serializers.Serializer):
    revision = serializers.IntegerField(min_value=0)


class LabelOut(serializers.Serializer):
    code = serializers.CharField()
    decision = serializers.CharField()
    evidence = serializers.ListField(child=EvidenceField())
    rationale = serializers.CharField()


class AnnotationOut(serializers.Serializer):
    """My annotation (id null and revision 0 before the first save)."""

    id = serializers.IntegerField(allow_null=True)
    trace = serializers.IntegerField()
    round = serializers.IntegerField(allow_null=True)
    taxonomy_version = serializers.IntegerField()
    revision = serializers.IntegerField()
    state = serializers.CharField()
    task_success = serializers.CharField()
    notes = serializers.CharField()
    open_codes = serializers.ListField(child=serializers.CharField())
    labels = LabelOut(many=True)
    attribution = AttributionOut(allow_null=True)
    submitted_at = serializers.DateTimeField(allow_null=True)


class FieldError(serializers.Serializer):
    field = serializers.CharField()
    message = serializers.CharField()


class ErrorOut(serializers.Serializer):
    detail = serializers.CharField()
    errors = FieldError(many=True, required=False)


class ConflictOut(serializers.Serializer):
    detail = serializers.CharField()
    current = AnnotationOut()


@extend_schema_field(OpenApiTypes.OBJECT)
class _Any(serializers.JSONField):
    pass


class EventOut(serializers.Serializer):
    revision = serializers.IntegerField()
    action = serializers.CharField()
    at = serializers.DateTimeField()
    by = serializers.CharField(source="by.username", allow_null=True, default=None)
    before = _Any()
    after = _Any()


class OpenCodeOut(serializers.Serializer):
    name = serializers.CharField()
    n_uses = serializers.IntegerField()


class QueueItemOut(serializers.Serializer):
    project = serializers.CharField(help_text="Project slug.")
    project_name = serializers.CharField()
    trace = serializers.IntegerField()
    trace_title = serializers.CharField()
    round = serializers.IntegerField(allow_null=True)
    round_name = serializers.CharField(allow_null=True)
    status = serializers.CharField(help_text="todo | draft | submitted")
    url = serializers.CharField(help_text="The labelling screen.")

    def to_representation(self, item):

        if isinstance(item, Trace):
            project, trace, rnd = item.project, item, None
        else:  # RoundTrace
            project, trace, rnd = item.round.project, item.trace, item.round
        url = reverse("annotations:workspace", kwargs={"slug": project.slug, "pk": trace.pk})
        return {
            "project": project.slug,
            "project_name": project.name,
            "trace": trace.pk,
            "trace_title": trace.display_name,
            "round": rnd.pk if rnd else None,
            "round_name": rnd.name if rnd else None,
            "status": item.status,
            "url": f"{url}?round={rnd.pk}" if rnd else url,
        }


class RaterOut(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()


class VisibleAnnotationOut(serializers.Serializer):
    """Another rater's annotation that the blind rule lets the caller see."""

    id = serializers.IntegerField()
    rater = RaterOut()
    round = serializers.IntegerField(source="round_id", allow_null=True)
    taxonomy_version = serializers.IntegerField(source="taxonomy_version_id")
    state = serializers.CharField()
    task_success = serializers.CharField()
    is_suggestion = serializers.SerializerMethodField(help_text="A non-human rater's labels outside rounds.")
    labels = serializers.SerializerMethodField()
    attribution = serializers.SerializerMethodField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(AttributionOut(allow_null=True))
    def get_attribution(self, obj):

        return attribution_as_dict(getattr(obj, "attribution", None))

    def get_is_suggestion(self, obj) -> bool:
        return obj.round_id is None and obj.rater.kind != "human"

    @extend_schema_field(LabelOut(many=True))
    def get_labels(self, obj):
        rows = sorted(obj.labels.all(), key=lambda lab: (lab.mode.order, lab.mode.code))
        return [
            {"code": lab.mode.code, "decision": lab.decision, "evidence": lab.evidence, "rationale": lab.rationale}
            for lab in rows
        ]
