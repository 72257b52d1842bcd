import pytest
from django.core.exceptions import ValidationError

from taxonomy import services
from taxonomy.models import Taxonomy, TaxonomyVersion
from taxonomy.selectors import version_diff


@pytest.fixture
def draft(mast_version):
    return services.version_draft_from(source=mast_version, notes="round 2 refinements")


def mapping(version):
    return sorted((m.old_code, m.new_code, m.kind) for m in version.mappings.exclude(kind="same"))


def test_rename_records_old_to_new_code(draft):
    services.mode_rename(mode=draft.modes.get(code="2.6"), new_code="2.6", new_name="Reasoning-Action Gap")
    services.mode_rename(mode=draft.modes.get(code="1.5"), new_code="1.6")
    assert mapping(draft) == [("1.5", "1.6", "rename"), ("2.6", "2.6", "rename")]


def test_split_maps_one_old_code_to_each_new_code(draft):
    services.mode_split(
        mode=draft.modes.get(code="3.2"),
        into=[
            {"code": "3.2", "name": "No verification", "definition": "Nothing is checked."},
            {"code": "3.4", "name": "Partial verification", "definition": "Only part is checked."},
        ],
    )
    assert mapping(draft) == [("3.2", "3.2", "split"), ("3.2", "3.4", "split")]
    assert set(draft.modes.values_list("code", flat=True)) >= {"3.2", "3.4"}


def test_merge_maps_each_old_code_to_the_merged_code(draft):
    services.mode_merge(
        modes=[draft.modes.get(code="3.2"), draft.modes.get(code="3.3")],
        code="3.2",
        name="Verification failure",
        definition="Checks are missing, partial or wrong.",
    )
    assert mapping(draft) == [("3.2", "3.2", "merge"), ("3.3", "3.2", "merge")]
    assert not draft.modes.filter(code="3.3").exists()


def test_remove_and_add_are_recorded(draft):
    services.mode_remove(mode=draft.modes.get(code="2.1"))
    services.mode_add(version=draft, code="2.7", name="Role swap", definition="Two agents swap roles.")
    assert mapping(draft) == [("", "2.7", "add"), ("2.1", "", "remove")]


def test_adding_a_duplicate_code_is_refused(draft):
    with pytest.raises(ValidationError, match="already exists"):
        services.mode_add(version=draft, code="1.1", name="x", definition="y")


def test_diff_shows_changed_added_and_removed_codes(mast_version, draft):
    services.mode_edit(mode=draft.modes.get(code="2.2"), definition="Guessing instead of asking.")
    services.mode_remove(mode=draft.modes.get(code="2.1"))
    services.mode_add(version=draft, code="2.7", name="Role swap", definition="Two agents swap roles.")
    rows = {r.code: r.status for r in version_diff(old=mast_version, new=draft)}
    assert rows["2.2"] == "changed" and rows["2.1"] == "removed" and rows["2.7"] == "added"
    assert rows["1.1"] == "same"


def test_diff_escapes_definition_text(mast_version, draft):
    services.mode_edit(mode=draft.modes.get(code="2.2"), definition="<script>alert(1)</script>")
    row = next(r for r in version_diff(old=mast_version, new=draft) if r.code == "2.2")
    assert "<script>" not in row.definition_html
    assert "&lt;script&gt;" in row.definition_html


BASE = {
    "format": "mast-taxonomy/1",
    "name": "Tiny",
    "categories": [{"code": "1", "name": "One"}],
    "modes": [{"code": "1.1", "name": "A", "definition": "a"}, {"code": "1.2", "name": "B", "definition": "b"}],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "something/9"}, "Unknown taxonomy format"),
        ({"modes": []}, "no failure modes"),
        ({"modes": [{"code": "", "name": "A", "definition": "a"}]}, "code must have"),
        ({"modes": [{"code": "1.1", "name": "A", "definition": "a"}] * 2}, "Duplicate failure-mode codes: 1.1"),
        ({"modes": [{"code": "2.1", "name": "A", "definition": "a"}]}, "category '2' does not exist"),
        ({"modes": [{"code": "1.1", "name": "A", "definition": ""}]}, "missing definition"),
        ({"parent_version": 1, "mapping": [{"old_code": "1.1", "new_code": "9.9", "kind": "rename"}]}, "9.9"),
    ],
)
def test_bad_taxonomy_json_is_refused_and_nothing_is_written(db, change, message):
    if "parent_version" in change:
        services.version_import(data=BASE)
    before = (Taxonomy.objects.count(), TaxonomyVersion.objects.count())
    with pytest.raises(ValidationError, match=message):
        services.version_import(data={**BASE, **change})
    if "parent_version" in change:
        assert TaxonomyVersion.objects.filter(taxonomy__name="Tiny").count() == 1
    else:
        assert (Taxonomy.objects.count(), TaxonomyVersion.objects.count()) == before
