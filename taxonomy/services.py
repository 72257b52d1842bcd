"""Writes on taxonomies: seeding, drafting a new version, editing modes with a code mapping,
publishing, and JSON import.

A published version is frozen: every function here refuses to change it, and database
triggers (migration 0002) refuse it too, so raw SQL or the admin cannot slip past.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from taxonomy import mast_v1
from taxonomy.models import Category, FailureMode, ModeMapping, Taxonomy, TaxonomyVersion

EXPORT_FORMAT = "mast-taxonomy/1"


def _ensure_draft(version: TaxonomyVersion) -> None:
    if version.is_published:
        raise ValidationError(f"{version.label} is published and cannot be changed; draft a new version.")


def taxonomy_seed_mast() -> TaxonomyVersion:
    """Create "MAST" version 1 (published) if it does not exist yet; return it."""
    existing = TaxonomyVersion.objects.filter(taxonomy__name=mast_v1.NAME, number=1).first()
    if existing:
        return existing
    data = {
        "format": EXPORT_FORMAT,
        "name": mast_v1.NAME,
        "description": mast_v1.DESCRIPTION,
        "notes": "Seeded on migrate: codes and names from the paper, definitions in the project's words.",
        "categories": [
            {"code": c, "name": n, "description": d, "what_to_try": mast_v1.WHAT_TO_TRY.get(c, "")}
            for c, n, d in mast_v1.CATEGORIES
        ],
        "modes": [
            {"code": code, "name": name, "definition": definition, "examples": mast_v1.EXAMPLES.get(code, "")}
            for code, name, definition in mast_v1.MODES
        ],
    }
    return version_import(data=data, publish=True)


def _clean_code(code: Any, where: str) -> str:
    code = str(code or "").strip()
    if not code or len(code) > 10:
        raise ValidationError(f"{where}: a code must have 1 to 10 characters, got {code!r}.")
    return code


def _clean_categories(categories: list) -> list[tuple[str, str, str, str]]:
    """The categories of a taxonomy file as (code, name, description, what_to_try), each code once."""
    cat_rows: list[tuple[str, str, str, str]] = []
    for i, cat in enumerate(categories):
        where = f"categories[{i}]"
        if not isinstance(cat, dict):
            raise ValidationError(f"{where}: expected an object.")
        code = _clean_code(cat.get("code"), where)
        if not str(cat.get("name") or "").strip():
            raise ValidationError(f"{where} ({code}): missing name.")
        cat_rows.append(
            (code, str(cat["name"]).strip(), str(cat.get("description") or ""), str(cat.get("what_to_try") or ""))
        )
    cat_codes = [c for c, *_ in cat_rows]
    dup = {c for c in cat_codes if cat_codes.count(c) > 1}
    if dup:
        raise ValidationError(f"Duplicate category codes: {', '.join(sorted(dup))}.")
    return cat_rows


def _clean_modes(modes: list, cat_codes: list[str]) -> list[dict[str, str]]:
    """The failure modes of a taxonomy file, each in a known category (default: its code's
    prefix), named and defined, each code once."""
    mode_rows: list[dict[str, str]] = []
    for i, mode in enumerate(modes):
        where = f"modes[{i}]"
        if not isinstance(mode, dict):
            raise ValidationError(f"{where}: expected an object.")
        code = _clean_code(mode.get("code"), where)
        category = str(mode.get("category") or code.split(".")[0])
        if category not in cat_codes:
            raise ValidationError(f"{where} ({code}): category {category!r} does not exist.")
        if not str(mode.get("name") or "").strip():
            raise ValidationError(f"{where} ({code}): missing name.")
        if not str(mode.get("definition") or "").strip():
            raise ValidationError(f"{where} ({code}): missing definition.")
        mode_rows.append(
            {
                "code": code,
                "category": category,
                "name": str(mode["name"]).strip(),
                "definition": str(mode["definition"]).strip(),
                "examples": str(mode.get("examples") or ""),
                "counter_examples": str(mode.get("counter_examples") or ""),
                "what_to_try": str(mode.get("what_to_try") or ""),
            }
        )
    mode_codes = [m["code"] for m in mode_rows]
    dup = {c for c in mode_codes if mode_codes.count(c) > 1}
    if dup:
        raise ValidationError(f"Duplicate failure-mode codes: {', '.join(sorted(dup))}.")
    return mode_rows


def version_import(
    *, data: dict[str, Any], publish: bool = False, by=None, version_number: int | None = None
) -> TaxonomyVersion:
    """Create a taxonomy version from the export JSON shape. All or nothing.

    Shape: {"format": "mast-taxonomy/1", "name", "description"?, "notes"?,
    "categories": [{"code", "name", "description"?, "what_to_try"?}], "modes": [{"code", "name",
    "definition", "category"? (defaults to the code's prefix), "examples"?, "counter_examples"?,
    "what_to_try"?}],
    "mapping"?: [{"old_code", "new_code", "kind", "note"?}], "parent_version"?: int}
    """
    if not isinstance(data, dict):
        raise ValidationError("The taxonomy file must hold a JSON object.")
    fmt = data.get("format", EXPORT_FORMAT)
    if fmt != EXPORT_FORMAT:
        raise ValidationError(f"Unknown taxonomy format {fmt!r}; expected {EXPORT_FORMAT!r}.")
    name = str(data.get("name") or "").strip()
    if not name:
        raise ValidationError("The taxonomy has no name.")
    categories = data.get("categories")
    modes = data.get("modes")
    if not isinstance(categories, list) or not categories:
        raise ValidationError("The taxonomy has no categories.")
    if not isinstance(modes, list) or not modes:
        raise ValidationError("The taxonomy has no failure modes.")

    cat_rows = _clean_categories(categories)
    mode_rows = _clean_modes(modes, [c for c, *_ in cat_rows])
    mode_codes = [m["code"] for m in mode_rows]

    with transaction.atomic():
        taxonomy, _ = Taxonomy.objects.get_or_create(
            name=name,
            defaults={"slug": _unique_slug(name), "description": str(data.get("description") or "")},
        )
        parent = None
        if data.get("parent_version") is not None:
            parent = TaxonomyVersion.objects.filter(taxonomy=taxonomy, number=data["parent_version"]).first()
            if parent is None:
                raise ValidationError(f"parent_version {data['parent_version']} of {name!r} does not exist here.")
        number = version_number or (taxonomy.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        if taxonomy.versions.filter(number=number).exists():
            raise ValidationError(f"{name} v{number} already exists.")
        version = TaxonomyVersion.objects.create(
            taxonomy=taxonomy,
            number=number,
            parent=parent,
            notes=str(data.get("notes") or ""),
            created_by=by,
        )
        cats = {
            code: Category.objects.create(
                version=version, code=code, name=cname, description=desc, what_to_try=tip, order=i
            )
            for i, (code, cname, desc, tip) in enumerate(cat_rows)
        }
        FailureMode.objects.bulk_create(
            FailureMode(
                version=version,
                category=cats[m["category"]],
                code=m["code"],
                name=m["name"],
                definition=m["definition"],
                examples=m["examples"],
                counter_examples=m["counter_examples"],
                what_to_try=m["what_to_try"],
                order=i,
            )
            for i, m in enumerate(mode_rows)
        )
        mapping = data.get("mapping") or []
        if mapping and parent is None:
            raise ValidationError("A mapping needs parent_version: it maps the parent's codes to these.")
        _mapping_import(version=version, parent=parent, rows=mapping, new_codes=set(mode_codes))
        if publish:
            version_publish(version=version, by=by)
    return version


def _mapping_import(
    *, version: TaxonomyVersion, parent: TaxonomyVersion | None, rows: Iterable[dict], new_codes: set[str]
) -> None:
    if parent is None:
        return
    old_codes = set(parent.modes.values_list("code", flat=True))
    kinds = set(ModeMapping.Kind.values)
    for i, row in enumerate(rows):
        where = f"mapping[{i}]"
        old, new, kind = str(row.get("old_code") or ""), str(row.get("new_code") or ""), row.get("kind")
        if kind not in kinds:
            raise ValidationError(f"{where}: unknown kind {kind!r}; expected one of {sorted(kinds)}.")
        if old and old not in old_codes:
            raise ValidationError(f"{where}: old code {old!r} is not a mode of {parent.label}.")
        if new and new not in new_codes:
            raise ValidationError(f"{where}: new code {new!r} is not a mode of this version.")
        ModeMapping.objects.create(
            version=version, old_code=old, new_code=new, kind=kind, note=str(row.get("note") or "")
        )


def _unique_slug(name: str) -> str:
    base = slugify(name)[:90] or "taxonomy"
    slug, n = base, 2
    while Taxonomy.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def version_export(*, version: TaxonomyVersion) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "name": version.taxonomy.name,
        "description": version.taxonomy.description,
        "version": version.number,
        "status": version.status,
        "notes": version.notes,
        "categories": [
            {"code": c.code, "name": c.name, "description": c.description, "what_to_try": c.what_to_try}
            for c in version.categories.all()
        ],
        "modes": [
            {
                "code": m.code,
                "category": m.category.code,
                "name": m.name,
                "definition": m.definition,
                "examples": m.examples,
                "counter_examples": m.counter_examples,
                "what_to_try": m.what_to_try,
            }
            for m in version.modes.select_related("category")
        ],
    }
    if version.parent_id:
        data["parent_version"] = version.parent.number
        data["mapping"] = [
            {"old_code": r.old_code, "new_code": r.new_code, "kind": r.kind, "note": r.note}
            for r in version.mappings.all()
        ]
    return data


def version_publish(*, version: TaxonomyVersion, by=None) -> TaxonomyVersion:
    if version.is_published:
        return version
    if not version.modes.exists():
        raise ValidationError("A version without failure modes cannot be published.")
    version.status = TaxonomyVersion.Status.PUBLISHED
    version.published_at = timezone.now()
    version.save(update_fields=["status", "published_at"])
    return version


@transaction.atomic
def version_draft_from(*, source: TaxonomyVersion, by=None, notes: str = "") -> TaxonomyVersion:
    """A new draft version copying `source`, with an identity mapping from its codes."""
    taxonomy = source.taxonomy
    number = (taxonomy.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = TaxonomyVersion.objects.create(
        taxonomy=taxonomy, number=number, parent=source, notes=notes, created_by=by
    )
    cats = {}
    for cat in source.categories.all():
        cats[cat.pk] = Category.objects.create(
            version=version,
            code=cat.code,
            name=cat.name,
            description=cat.description,
            what_to_try=cat.what_to_try,
            order=cat.order,
        )
    modes = list(source.modes.all())
    FailureMode.objects.bulk_create(
        FailureMode(
            version=version,
            category=cats[m.category_id],
            code=m.code,
            name=m.name,
            definition=m.definition,
            examples=m.examples,
            counter_examples=m.counter_examples,
            what_to_try=m.what_to_try,
            order=m.order,
        )
        for m in modes
    )
    ModeMapping.objects.bulk_create(
        ModeMapping(version=version, old_code=m.code, new_code=m.code, kind=ModeMapping.Kind.SAME) for m in modes
    )
    return version


def version_draft_next(*, source: TaxonomyVersion, by=None, notes: str = "") -> TaxonomyVersion:
    """The draft already started from ``source`` (the newest), or a new one: where a round's
    "Revise definition" and an open code's "Promote" put their changes, so they meet in one draft."""
    draft = (
        TaxonomyVersion.objects.filter(parent=source, status=TaxonomyVersion.Status.DRAFT).order_by("-number").first()
    )
    return draft or version_draft_from(source=source, by=by, notes=notes)


def _origins(version: TaxonomyVersion, code: str) -> list[ModeMapping]:
    return list(version.mappings.filter(new_code=code))


@transaction.atomic
def mode_edit(
    *,
    mode: FailureMode,
    name: str | None = None,
    definition: str | None = None,
    examples: str | None = None,
    counter_examples: str | None = None,
    what_to_try: str | None = None,
    note: str = "",
) -> FailureMode:
    """Edit a mode's text in a draft version; the mapping records the definition change."""
    _ensure_draft(mode.version)
    meaning_changed = False
    for field, value in (
        ("name", name),
        ("definition", definition),
        ("examples", examples),
        ("counter_examples", counter_examples),
        ("what_to_try", what_to_try),
    ):
        if value is not None:
            value = value.strip() if field in ("name", "definition") else value
            meaning_changed |= field != "what_to_try" and getattr(mode, field) != value
            setattr(mode, field, value)
    if not mode.name or not mode.definition:
        raise ValidationError("A failure mode needs a name and a definition.")
    mode.full_clean()
    mode.save()
    if meaning_changed:  # a new "what to try" alone does not change what the mode means
        mode.version.mappings.filter(new_code=mode.code, kind=ModeMapping.Kind.SAME).update(
            kind=ModeMapping.Kind.EDIT, note=note
        )
    return mode


@transaction.atomic
def category_edit(
    *, category: Category, name: str | None = None, description: str | None = None, what_to_try: str | None = None
) -> Category:
    """Edit a category's text in a draft version (its modes' codes and mapping are untouched)."""
    _ensure_draft(category.version)
    if name is not None:
        category.name = name.strip()
    if description is not None:
        category.description = description
    if what_to_try is not None:
        category.what_to_try = what_to_try
    if not category.name:
        raise ValidationError("A category needs a name.")
    category.full_clean()
    category.save()
    return category


def _new_mode(
    version: TaxonomyVersion,
    *,
    code: str,
    name: str,
    definition: str,
    category: Category | None = None,
    order: int | None = None,
) -> FailureMode:
    code = _clean_code(code, "new mode")
    if version.modes.filter(code=code).exists():
        raise ValidationError(f"Code {code} already exists in {version.label}.")
    if category is None:
        category = version.categories.filter(code=code.split(".")[0]).first()
        if category is None:
            raise ValidationError(f"No category {code.split('.')[0]!r} for code {code}.")
    if not name.strip() or not definition.strip():
        raise ValidationError(f"Mode {code} needs a name and a definition.")
    if order is None:
        order = (version.modes.aggregate(n=Max("order"))["n"] or 0) + 1
    return FailureMode.objects.create(
        version=version, category=category, code=code, name=name.strip(), definition=definition.strip(), order=order
    )


@transaction.atomic
def mode_add(*, version: TaxonomyVersion, code: str, name: str, definition: str, note: str = "") -> FailureMode:
    _ensure_draft(version)
    mode = _new_mode(version, code=code, name=name, definition=definition)
    ModeMapping.objects.create(version=version, old_code="", new_code=mode.code, kind=ModeMapping.Kind.ADD, note=note)
    return mode


@transaction.atomic
def mode_remove(*, mode: FailureMode, note: str = "") -> None:
    version = mode.version
    _ensure_draft(version)
    origins = _origins(version, mode.code)
    for row in origins:
        if row.old_code:
            row.new_code, row.kind, row.note = "", ModeMapping.Kind.REMOVE, note
            row.save()
        else:
            row.delete()
    mode.delete()


@transaction.atomic
def mode_rename(
    *, mode: FailureMode, new_code: str | None = None, new_name: str | None = None, note: str = ""
) -> FailureMode:
    version = mode.version
    _ensure_draft(version)
    old_code = mode.code
    if new_code and new_code != old_code:
        new_code = _clean_code(new_code, "rename")
        if version.modes.filter(code=new_code).exists():
            raise ValidationError(f"Code {new_code} already exists in {version.label}.")
        mode.code = new_code
    if new_name:
        mode.name = new_name.strip()
    mode.save()
    for row in _origins(version, old_code):
        row.new_code = mode.code
        if row.kind in (ModeMapping.Kind.SAME, ModeMapping.Kind.EDIT):
            row.kind = ModeMapping.Kind.RENAME
        row.note = note or row.note
        row.save()
    return mode


@transaction.atomic
def mode_split(*, mode: FailureMode, into: list[dict[str, str]], note: str = "") -> list[FailureMode]:
    """Replace `mode` by two or more modes ({"code", "name", "definition"} each)."""
    version = mode.version
    _ensure_draft(version)
    if len(into) < 2:
        raise ValidationError("A split needs at least two new modes.")
    origins = [r.old_code for r in _origins(version, mode.code) if r.old_code]
    version.mappings.filter(new_code=mode.code).delete()
    category, order = mode.category, mode.order
    mode.delete()
    created = []
    for spec in into:
        new = _new_mode(
            version,
            code=spec.get("code", ""),
            name=spec.get("name", ""),
            definition=spec.get("definition", ""),
            category=category,
            order=order,
        )
        created.append(new)
        for old in origins or [""]:
            ModeMapping.objects.create(
                version=version,
                old_code=old,
                new_code=new.code,
                kind=ModeMapping.Kind.SPLIT if old else ModeMapping.Kind.ADD,
                note=note,
            )
    return created


@transaction.atomic
def mode_merge(*, modes: list[FailureMode], code: str, name: str, definition: str, note: str = "") -> FailureMode:
    """Replace two or more modes of one draft version by a single mode."""
    if len(modes) < 2:
        raise ValidationError("A merge needs at least two modes.")
    version = modes[0].version
    _ensure_draft(version)
    if any(m.version_id != version.pk for m in modes):
        raise ValidationError("Only modes of the same version can be merged.")
    origins: list[str] = []
    for m in modes:
        origins += [r.old_code for r in _origins(version, m.code) if r.old_code]
        version.mappings.filter(new_code=m.code).delete()
    category, order = modes[0].category, modes[0].order
    for m in modes:
        m.delete()
    merged = _new_mode(version, code=code, name=name, definition=definition, category=category, order=order)
    for old in sorted(set(origins)) or [""]:
        ModeMapping.objects.create(
            version=version,
            old_code=old,
            new_code=merged.code,
            kind=ModeMapping.Kind.MERGE if old else ModeMapping.Kind.ADD,
            note=note,
        )
    return merged
