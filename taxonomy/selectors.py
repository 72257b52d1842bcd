"""Reads on taxonomies: listings, a version with its modes, the modes of a version in display order
(the one reader every area uses), and the diff between two versions."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.db.models import Count, Prefetch, QuerySet
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from taxonomy.models import Category, FailureMode, Taxonomy, TaxonomyVersion


def taxonomy_list() -> QuerySet[Taxonomy]:
    return Taxonomy.objects.prefetch_related(
        Prefetch("versions", queryset=TaxonomyVersion.objects.annotate(n_modes=Count("modes")).order_by("number"))
    )


def version_get(*, taxonomy_slug: str, number: int) -> TaxonomyVersion | None:
    return (
        TaxonomyVersion.objects.select_related("taxonomy", "parent")
        .prefetch_related(
            Prefetch("categories", queryset=Category.objects.prefetch_related("modes")),
            "mappings",
        )
        .filter(taxonomy__slug=taxonomy_slug, number=number)
        .first()
    )


# ------------------------------------------------------------------ the modes of a version

# Display order of a version's modes, shared by every reader so columns, bits and lists agree.
MODE_ORDER = ("category__order", "category__code", "order", "code")

# Published versions are immutable (services and database triggers refuse writes), so their
# modes can be kept for the life of the process; drafts change and are always read fresh.
_PUBLISHED_MODES: dict[int, list[FailureMode]] = {}


def version_modes(*, version: TaxonomyVersion) -> list[FailureMode]:
    """The version's modes in display order (category order, category code, mode order, code),
    each with its category. Cached per process for published versions: treat the modes as read-only."""
    if not version.is_published:
        return _modes_of(version)
    modes = _PUBLISHED_MODES.get(version.pk)
    if modes is None:
        modes = _PUBLISHED_MODES[version.pk] = _modes_of(version)
    return list(modes)


def _modes_of(version: TaxonomyVersion) -> list[FailureMode]:
    return list(FailureMode.objects.filter(version=version).select_related("category").order_by(*MODE_ORDER))


def versions_mode_codes(*, version_ids: set[int]) -> dict[int, list[tuple[int, str]]]:
    """version id -> [(mode id, code)] of several versions in one query, in ``version_modes`` order
    (bulk readers use position i as bit i of a label mask)."""
    out: dict[int, list[tuple[int, str]]] = {v: [] for v in version_ids}
    for mid, vid, code in (
        FailureMode.objects.filter(version_id__in=version_ids)
        .order_by(*MODE_ORDER)
        .values_list("id", "version_id", "code")
    ):
        out[vid].append((mid, code))
    return out


def version_is_newer(*, version: TaxonomyVersion, than: TaxonomyVersion | None) -> bool:
    """Is ``version`` a later version than ``than``: drafted from it (directly or through a chain of
    parents), or a higher number of the same taxonomy? Versions of other taxonomies are not newer."""
    if than is None or version.pk == than.pk:
        return False
    seen: set[int] = set()
    v = version.parent
    while v is not None and v.pk not in seen:
        if v.pk == than.pk:
            return True
        seen.add(v.pk)
        v = v.parent
    return version.taxonomy_id == than.taxonomy_id and version.number > than.number


@dataclass
class DiffRow:
    code: str
    status: str  # "same" | "changed" | "added" | "removed"
    old: FailureMode | None
    new: FailureMode | None
    name_html: SafeString
    definition_html: SafeString
    mapped_from: list[str]


def _word_diff(a: str, b: str) -> SafeString:
    """Word-level diff as escaped HTML with <ins>/<del>; every piece of text is escaped."""
    aw, bw = a.split(" "), b.split(" ")
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=aw, b=bw, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape(" ".join(aw[i1:i2])))
        if op in ("delete", "replace"):
            out.append(f'<del class="diff-del">{escape(" ".join(aw[i1:i2]))}</del>')
        if op in ("insert", "replace"):
            out.append(f'<ins class="diff-add">{escape(" ".join(bw[j1:j2]))}</ins>')
    return mark_safe(" ".join(out))  # noqa: S308 - built only from escaped pieces above


def version_diff(*, old: TaxonomyVersion, new: TaxonomyVersion) -> list[DiffRow]:
    old_modes = {m.code: m for m in old.modes.all()}
    new_modes = {m.code: m for m in new.modes.all()}
    mapped: dict[str, list[str]] = {}
    if new.parent_id == old.pk:
        for row in new.mappings.all():
            if row.new_code and row.old_code and row.old_code != row.new_code:
                mapped.setdefault(row.new_code, []).append(row.old_code)
    rows = []
    for code in sorted(set(old_modes) | set(new_modes), key=_code_key):
        a, b = old_modes.get(code), new_modes.get(code)
        if a and b:
            same = a.name == b.name and a.definition == b.definition
            status = "same" if same else "changed"
        else:
            status = "removed" if a else "added"
        rows.append(
            DiffRow(
                code=code,
                status=status,
                old=a,
                new=b,
                name_html=_word_diff(a.name if a else "", b.name if b else ""),
                definition_html=_word_diff(a.definition if a else "", b.definition if b else ""),
                mapped_from=mapped.get(code, []),
            )
        )
    return rows


def _code_key(code: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in code.split("."))
