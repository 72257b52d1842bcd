"""Django admin for site admins: every annotations model, by area (a test checks none is missing)."""

from django.contrib import admin

from annotations.models import (
    Adjudication,
    AgreedMask,
    AgreementReport,
    AlertEvent,
    AlertRule,
    Annotation,
    AnnotationEvent,
    Attribution,
    AttributionDecision,
    BehaviourGroup,
    BehaviourHit,
    BehaviourSearch,
    DisagreementComment,
    JudgeCache,
    JudgeItem,
    JudgeRun,
    LabelsStamp,
    LiveDraw,
    LivePolicy,
    ModeLabel,
    OpenCode,
    PromptTemplate,
    ProviderConnection,
    Rater,
    Release,
    ReleaseFile,
    ReleasePolicy,
    Round,
    RoundAnnotator,
    RoundTrace,
    SearchAction,
    Webhook,
    WebhookDelivery,
)
from traces.admin import TriggerKeptAdmin


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


@admin.register(LabelsStamp)
class LabelsStampAdmin(TriggerKeptAdmin):
    list_display = ["project_id", "version"]


@admin.register(AgreedMask)
class AgreedMaskAdmin(TriggerKeptAdmin):
    """Database triggers keep it (migration 0012); an edit by hand would make the dashboard
    disagree with the adjudications."""

    list_display = ["round", "trace_id", "known", "present"]
    list_select_related = ["round"]


@admin.register(DisagreementComment)
class DisagreementCommentAdmin(admin.ModelAdmin):
    list_display = ["round", "trace", "mode", "author", "created_at"]
    raw_id_fields = ["trace"]


# ---------------------------------------------------------------- judge


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    list_display = ["taxonomy_version", "number", "is_active", "notes", "created_by", "created_at"]
    list_filter = ["is_active"]


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "provider", "model", "state", "n_total", "n_done", "n_failed", "created_at"]
    list_filter = ["state", "provider"]
    search_fields = ["model"]
    list_select_related = ["project"]


@admin.register(JudgeItem)
class JudgeItemAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "trace", "state", "attempts", "cached", "finished_at"]
    list_filter = ["state", "cached"]
    raw_id_fields = ["trace", "annotation"]


@admin.register(ProviderConnection)
class ProviderConnectionAdmin(admin.ModelAdmin):
    """The key is never shown or edited here (it is write-only: the connection page or API sets it)."""

    list_display = ["name", "project", "preset", "base_url", "key_source", "price_in", "price_out"]
    list_select_related = ["project"]
    exclude = ["key_encrypted"]
    readonly_fields = ["key_hint"]


@admin.register(JudgeCache)
class JudgeCacheAdmin(admin.ModelAdmin):
    list_display = ["key", "model", "prompt", "tokens_in", "tokens_out", "created_at"]
    search_fields = ["key", "content_hash"]


# ---------------------------------------------------------------- releases


class ReleaseFileInline(admin.TabularInline):
    model = ReleaseFile
    extra = 0
    fields = ["name", "kind", "size_bytes", "sha256"]
    readonly_fields = fields
    max_num = 0  # files are written by the build only


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ["project", "number", "title", "taxonomy_version", "selection", "status", "n_traces", "created_at"]
    list_filter = ["status", "selection"]
    inlines = [ReleaseFileInline]


@admin.register(ReleaseFile)
class ReleaseFileAdmin(admin.ModelAdmin):
    list_display = ["release", "name", "kind", "size_bytes"]


@admin.register(ReleasePolicy)
class ReleasePolicyAdmin(admin.ModelAdmin):
    list_display = ["project", "members_may_download", "updated_at"]


@admin.register(Attribution)
class AttributionAdmin(admin.ModelAdmin):
    list_display = ["annotation", "decisive_step", "no_single_step", "agent"]
    raw_id_fields = ["annotation"]


@admin.register(AttributionDecision)
class AttributionDecisionAdmin(admin.ModelAdmin):
    list_display = ["round", "trace", "decisive_step", "no_single_step", "agent", "basis"]
    list_filter = ["basis"]
    raw_id_fields = ["trace"]


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ["project", "name", "kind", "target", "active", "firing", "last_evaluated_at"]
    list_filter = ["kind", "active"]


class WebhookDeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    extra = 0
    fields = ["webhook", "attempt", "state", "due_at", "sent_at", "status_code", "error"]
    readonly_fields = fields
    can_delete = False


@admin.register(AlertEvent)
class AlertEventAdmin(admin.ModelAdmin):
    list_display = ["rule", "code", "fired_at", "resolved_at"]
    inlines = [WebhookDeliveryInline]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """The secret is never shown (it is stored encrypted; a new hook shows it once on the alerts page)."""

    list_display = ["project", "url", "secret_prefix", "active", "created_at"]
    exclude = ["secret"]
    readonly_fields = ["secret_prefix"]

    def has_add_permission(self, request):
        return False  # a hook needs a secret: added on the alerts page or the API


@admin.register(LivePolicy)
class LivePolicyAdmin(admin.ModelAdmin):
    list_display = ["project", "active", "connection", "model", "judge_share", "human_share", "human_round"]


@admin.register(LiveDraw)
class LiveDrawAdmin(admin.ModelAdmin):
    list_display = ["project", "trace", "drawn_at", "judge", "human", "run", "skipped"]
    list_filter = ["judge", "human"]
    raw_id_fields = ["trace", "run"]


@admin.register(SearchAction)
class SearchActionAdmin(admin.ModelAdmin):
    list_display = ["project", "kind", "created_by", "created_at", "undone_at"]
    list_filter = ["kind"]


@admin.register(BehaviourSearch)
class BehaviourSearchAdmin(admin.ModelAdmin):
    list_display = ["project", "description", "state", "model", "n_done", "tokens_in", "tokens_out", "cost"]
    list_filter = ["state"]


@admin.register(BehaviourHit)
class BehaviourHitAdmin(admin.ModelAdmin):
    list_display = ["search", "trace", "present", "score", "group"]
    raw_id_fields = ["trace"]


@admin.register(BehaviourGroup)
class BehaviourGroupAdmin(admin.ModelAdmin):
    list_display = ["search", "number", "name"]
