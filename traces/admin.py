"""Django admin for projects, traces, steps and import jobs."""

from django.contrib import admin

from traces.models import (
    ImportJob,
    IngestKey,
    IngestStat,
    LiveSpan,
    LiveTrace,
    Membership,
    Project,
    SearchWord,
    Step,
    Trace,
    TraceSource,
    TracesStamp,
)


class TriggerKeptAdmin(admin.ModelAdmin):
    """Read-only: database triggers keep these rows (an edit by hand could make a stale cache look fresh)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(SearchWord)
class SearchWordAdmin(TriggerKeptAdmin):  # the indexer keeps it: read-only as the stamps
    search_fields = ["word"]
    show_full_result_count = False  # millions of rows: no count(*) per page


@admin.register(TracesStamp)
class TracesStampAdmin(TriggerKeptAdmin):
    list_display = ["project_id", "version"]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "taxonomy_version", "reveal_suggestions", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "mas_name", "llm_name", "benchmark", "external_id", "n_steps", "size_bytes"]
    list_filter = ["project", "mas_name", "outcome"]
    search_fields = ["external_id", "title"]
    list_select_related = ["project"]
    # raw text can be megabytes: never render it as an editable field
    exclude = ["raw_text"]
    readonly_fields = [
        "content_hash",
        "size_bytes",
        "n_steps",
        "n_agents",
        "n_agent_switches",
        "n_chars",
        "n_lines",
        "n_repeated_steps",
        "agents",
        "import_job",
        "format",
    ]


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["trace", "index", "agent", "kind", "line_start", "line_end"]
    list_filter = ["kind"]
    raw_id_fields = ["trace"]


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "status", "n_imported", "n_merged", "n_duplicates", "created_by", "created_at"]
    list_filter = ["status"]


@admin.register(TraceSource)
class TraceSourceAdmin(admin.ModelAdmin):
    list_display = ["id", "trace", "external_id", "mas_name", "llm_name", "benchmark", "source_file", "created_at"]
    search_fields = ["external_id", "source_file"]
    raw_id_fields = ["trace", "import_job"]


@admin.register(IngestKey)
class IngestKeyAdmin(admin.ModelAdmin):
    """Keys are created on the project's Live traces page (shown once); here they can be read and revoked."""

    list_display = ["project", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]
    readonly_fields = ["project", "name", "prefix", "created_by", "last_used_at"]

    def has_add_permission(self, request):
        return False


@admin.register(LiveTrace)
class LiveTraceAdmin(admin.ModelAdmin):
    list_display = ["project", "otel_trace_id", "state", "n_spans", "last_span_at", "trace", "changed_after_labelling"]
    list_filter = ["state", "changed_after_labelling"]
    raw_id_fields = ["trace"]


@admin.register(LiveSpan)
class LiveSpanAdmin(admin.ModelAdmin):
    list_display = ["live", "span_id", "received_at"]
    raw_id_fields = ["live"]


@admin.register(IngestStat)
class IngestStatAdmin(admin.ModelAdmin):
    list_display = ["project", "hour", "requests", "refused_requests", "spans_accepted", "spans_new", "spans_rejected"]
