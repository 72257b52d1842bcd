"""Taxonomy -> TaxonomyVersion -> Category -> FailureMode, plus the code mapping between versions.

A version is editable while draft and frozen once published: services refuse writes, and
database triggers (see migration 0002) refuse them even from raw SQL.
"""

from django.conf import settings
from django.db import models


class Taxonomy(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "taxonomies"

    def __str__(self) -> str:
        return self.name


class TaxonomyVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    notes = models.TextField(blank=True, help_text="What changed in this version and why.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["taxonomy__name", "number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "number"], name="taxonomy_version_unique"),
            models.CheckConstraint(
                condition=models.Q(status__in=["draft", "published"]), name="taxonomy_version_status"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.taxonomy.name} v{self.number}"

    @property
    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED

    @property
    def label(self) -> str:
        return f"{self.taxonomy.name} v{self.number}"


class Category(models.Model):
    version = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="categories")
    code = models.CharField(max_length=10)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    what_to_try = models.TextField(
        blank=True, help_text="What a team could change when this category's failures go up (versioned with it)."
    )
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "code"]
        verbose_name_plural = "categories"
        constraints = [
            models.UniqueConstraint(fields=["version", "code"], name="category_code_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class FailureMode(models.Model):
    version = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="modes")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="modes")
    code = models.CharField(max_length=10)
    name = models.CharField(max_length=200)
    definition = models.TextField()
    examples = models.TextField(blank=True)
    counter_examples = models.TextField(blank=True)
    what_to_try = models.TextField(
        blank=True, help_text="What a team could change when this mode goes up; empty: the category's note."
    )
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "code"]
        constraints = [
            models.UniqueConstraint(fields=["version", "code"], name="failure_mode_code_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class ModeMapping(models.Model):
    """How a code of the parent version became codes of this version.

    One row per (old code, new code) edge: a rename is 1->1 with a new code, a split is 1->n,
    a merge is n->1, a removal has an empty new_code. Labels are carried across versions
    through these rows.
    """

    class Kind(models.TextChoices):
        SAME = "same", "Unchanged"
        EDIT = "edit", "Definition edited"
        RENAME = "rename", "Renamed / recoded"
        SPLIT = "split", "Split"
        MERGE = "merge", "Merged"
        REMOVE = "remove", "Removed"
        ADD = "add", "Added"

    version = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="mappings")
    old_code = models.CharField(max_length=10, blank=True)
    new_code = models.CharField(max_length=10, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["old_code", "new_code"]
        constraints = [
            models.UniqueConstraint(fields=["version", "old_code", "new_code"], name="mode_mapping_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.old_code or '-'} -> {self.new_code or '-'} ({self.kind})"


class CrossMapping(models.Model):
    """A mapping between two versions that were not drafted from one another, or a manager's
    correction of a drafted one: the same rows as ``ModeMapping`` (old code -> new code, kind),
    between any ``source`` and ``target``.

    Rows for a (source, target) pair replace the drafted mapping of that pair when the target's
    parent is the source (published ``ModeMapping`` rows are frozen; corrections live here).
    ``auto`` marks rows written by the name/code matcher (``taxonomy.automap``).
    """

    source = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="cross_out")
    target = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="cross_in")
    old_code = models.CharField(max_length=10, blank=True)
    new_code = models.CharField(max_length=10, blank=True)
    kind = models.CharField(max_length=10, choices=ModeMapping.Kind.choices)
    note = models.TextField(blank=True)
    auto = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["source", "target", "old_code", "new_code"]
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "old_code", "new_code"], name="cross_mapping_unique"),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="cross_mapping_two_versions"),
            models.CheckConstraint(
                condition=~(models.Q(old_code="") & models.Q(new_code="")), name="cross_mapping_has_a_code"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.old_code or '-'} -> {self.target_id}:{self.new_code or '-'} ({self.kind})"
