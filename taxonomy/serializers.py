"""DRF serializers of taxonomy versions, categories, modes and mappings."""

from rest_framework import serializers

from taxonomy.models import Category, FailureMode, ModeMapping, TaxonomyVersion


class FailureModeOut(serializers.ModelSerializer):
    category = serializers.CharField(source="category.code")

    class Meta:
        model = FailureMode
        fields = [
            "id",
            "code",
            "name",
            "category",
            "definition",
            "examples",
            "counter_examples",
            "what_to_try",
            "order",
        ]


class CategoryOut(serializers.ModelSerializer):
    class Meta:
        model = Category
        fields = ["code", "name", "description", "what_to_try", "order"]


class MappingOut(serializers.ModelSerializer):
    class Meta:
        model = ModeMapping
        fields = ["old_code", "new_code", "kind", "note"]


class VersionListOut(serializers.ModelSerializer):
    taxonomy = serializers.CharField(source="taxonomy.name")
    parent = serializers.IntegerField(source="parent.number", allow_null=True, default=None)

    class Meta:
        model = TaxonomyVersion
        fields = ["id", "taxonomy", "number", "status", "parent", "notes", "created_at", "published_at"]


class VersionDetailOut(VersionListOut):
    categories = CategoryOut(many=True)
    modes = FailureModeOut(many=True)
    mappings = MappingOut(many=True)

    class Meta(VersionListOut.Meta):
        fields = VersionListOut.Meta.fields + ["categories", "modes", "mappings"]
