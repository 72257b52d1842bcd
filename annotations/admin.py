"""Django admin for site admins. Judge and release models register themselves in their own modules."""

from django.contrib import admin

from annotations.models import (
    Adjudication,
    AgreementReport,
    Annotation,
    AnnotationEvent,
    ModeLabel,
    OpenCode,
    Rater,
    Round,
    RoundAnnotator,
    RoundTrace,
)


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "user", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name"]


class ModeLabelInline(admin.TabularInline):
    model = ModeLabel
    extra = 0


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    list_display = ["id", "trace", "rater", "taxonomy_version", "round", "state", "revision", "updated_at"]
    list_filter = ["state", "rater__kind"]
    raw_id_fields = ["trace"]
    inlines = [ModeLabelInline]


@admin.register(AnnotationEvent)
class AnnotationEventAdmin(admin.ModelAdmin):
    list_display = ["annotation", "action", "revision", "by", "at"]
    raw_id_fields = ["annotation"]


@admin.register(OpenCode)
class OpenCodeAdmin(admin.ModelAdmin):
    list_display = ["name", "project"]


class RoundAnnotatorInline(admin.TabularInline):
    model = RoundAnnotator
    extra = 0


@admin.register(Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "taxonomy_version", "state", "created_at", "closed_at"]
    list_filter = ["state", "project"]
    inlines = [RoundAnnotatorInline]


@admin.register(RoundTrace)
class RoundTraceAdmin(admin.ModelAdmin):
    list_display = ["round", "trace", "order"]
    raw_id_fields = ["trace"]


@admin.register(Adjudication)
class AdjudicationAdmin(admin.ModelAdmin):
    list_display = ["round", "trace", "mode", "decision", "basis", "by", "at"]
    list_filter = ["basis", "decision"]
    raw_id_fields = ["trace"]


@admin.register(AgreementReport)
class AgreementReportAdmin(admin.ModelAdmin):
    list_display = ["round", "rater_set", "computed_at"]
