"""Django admin for taxonomies and their versions."""

from django.contrib import admin

from taxonomy.models import Category, CrossMapping, FailureMode, ModeMapping, Taxonomy, TaxonomyVersion


class CategoryInline(admin.TabularInline):
    model = Category
    extra = 0


class FailureModeInline(admin.StackedInline):
    model = FailureMode
    extra = 0


class ModeMappingInline(admin.TabularInline):
    model = ModeMapping
    extra = 0


@admin.register(Taxonomy)
class TaxonomyAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(TaxonomyVersion)
class TaxonomyVersionAdmin(admin.ModelAdmin):
    list_display = ["taxonomy", "number", "status", "parent", "published_at"]
    list_filter = ["taxonomy", "status"]
    inlines = [CategoryInline, FailureModeInline, ModeMappingInline]

    def get_readonly_fields(self, request, obj=None):
        # A published version is frozen (the database refuses changes too).
        if obj and obj.is_published:
            return [f.name for f in self.model._meta.fields]
        return ["status", "published_at"]

    def has_delete_permission(self, request, obj=None):
        return not (obj and obj.is_published)


@admin.register(CrossMapping)
class CrossMappingAdmin(admin.ModelAdmin):
    """Mappings between versions not drafted from one another (edited on Taxonomies -> Mappings)."""

    list_display = ["source", "target", "old_code", "new_code", "kind"]
    list_filter = ["kind"]
    list_select_related = ["source__taxonomy", "target__taxonomy"]
