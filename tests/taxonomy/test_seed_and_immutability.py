import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction

from taxonomy import services
from taxonomy.models import FailureMode, TaxonomyVersion


def test_mast_v1_is_seeded_on_migrate_with_14_modes_in_3_categories(db):
    version = TaxonomyVersion.objects.get(taxonomy__name="MAST", number=1)
    assert version.is_published
    assert list(version.categories.values_list("code", flat=True)) == ["1", "2", "3"]
    codes = list(version.modes.values_list("code", flat=True))
    assert codes == ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]
    assert version.modes.get(code="1.3").name == "Step Repetition"


def test_seeding_twice_keeps_one_version(db):
    first = services.taxonomy_seed_mast()
    assert services.taxonomy_seed_mast() == first
    assert TaxonomyVersion.objects.filter(taxonomy__name="MAST").count() == 1


def test_service_refuses_to_edit_a_published_version(mast_version):
    mode = mast_version.modes.get(code="1.1")
    with pytest.raises(ValidationError, match="published"):
        services.mode_edit(mode=mode, definition="changed")
    mode.refresh_from_db()
    assert mode.definition != "changed"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE taxonomy_failuremode SET definition = 'x' WHERE version_id = %s",
        "DELETE FROM taxonomy_failuremode WHERE version_id = %s",
        "UPDATE taxonomy_taxonomyversion SET notes = 'x' WHERE id = %s",
        "UPDATE taxonomy_category SET name = 'x' WHERE version_id = %s",
    ],
)
def test_database_refuses_raw_writes_to_a_published_version(mast_version, sql):
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, [mast_version.pk])
    assert FailureMode.objects.filter(version=mast_version, definition="x").count() == 0


def test_database_refuses_adding_a_mode_to_a_published_version(mast_version):
    cat = mast_version.categories.first()
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        FailureMode.objects.create(version=mast_version, category=cat, code="9.9", name="n", definition="d")


def test_draft_copy_is_editable_and_maps_codes(mast_version):
    draft = services.version_draft_from(source=mast_version)
    assert draft.number == 2 and not draft.is_published
    services.mode_edit(mode=draft.modes.get(code="2.2"), definition="Clearer words.")
    assert draft.mappings.get(old_code="2.2").kind == "edit"
    assert draft.mappings.get(old_code="1.1").kind == "same"
    services.version_publish(version=draft)
    draft.refresh_from_db()
    assert draft.is_published
