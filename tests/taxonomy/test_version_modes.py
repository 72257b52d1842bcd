"""version_modes: the one reader of a version's modes (display order, cached for published versions)."""

from taxonomy import services
from taxonomy.models import FailureMode
from taxonomy.selectors import version_modes, versions_mode_codes


def test_modes_come_in_category_order_then_mode_order(mast_version):
    draft = services.version_draft_from(source=mast_version)
    services.mode_add(version=draft, code="1.6", name="Late addition", definition="Added after 3.3.")
    codes = [m.code for m in version_modes(version=draft)]
    # mode_add gives 1.6 the highest mode order, but it is shown within category 1
    assert codes.index("1.6") == codes.index("1.5") + 1 and codes[-1] == "3.3"


def test_bulk_mode_codes_follow_the_same_order(mast_version):
    draft = services.version_draft_from(source=mast_version)
    services.mode_add(version=draft, code="1.6", name="Late addition", definition="Added after 3.3.")
    bulk = versions_mode_codes(version_ids={draft.pk, mast_version.pk})
    assert [c for _m, c in bulk[draft.pk]] == [m.code for m in version_modes(version=draft)]
    assert [c for _m, c in bulk[mast_version.pk]] == [m.code for m in version_modes(version=mast_version)]


def test_a_published_version_is_read_once_per_process(mast_version, django_assert_num_queries):
    first = version_modes(version=mast_version)
    with django_assert_num_queries(0):
        again = version_modes(version=mast_version)
    assert [m.code for m in again] == [m.code for m in first] and again[0].category.code == "1"


def test_a_draft_is_always_read_fresh(mast_version, django_assert_num_queries):
    draft = services.version_draft_from(source=mast_version)
    before = len(version_modes(version=draft))
    services.mode_add(version=draft, code="3.4", name="New", definition="A new mode.")
    with django_assert_num_queries(1):
        after = version_modes(version=draft)
    assert len(after) == before + 1 == FailureMode.objects.filter(version=draft).count()
