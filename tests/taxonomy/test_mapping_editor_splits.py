"""The mapping editor (/taxonomies/mappings/) edits splits: one old code onto several new codes."""

from __future__ import annotations

import pytest
from django.urls import reverse

from taxonomy.mapping import VersionMapper
from taxonomy.models import CrossMapping
from taxonomy.selectors import version_modes
from taxonomy.services import mode_add, version_draft_from, version_publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def v2(mast_version, manager):
    draft = version_draft_from(source=mast_version, by=manager)
    mode_add(version=draft, code="2.7", name="Silent handoff", definition="Work handed on without saying so.")
    return version_publish(version=draft)


def post_mapping(client, source, target, *, splits: dict[str, list[str]]):
    data = {"source": source.pk, "target": target.pk, "note": "split 2.6"}
    for m in version_modes(version=source):
        data[f"map-{m.code}"] = m.code
    for code, parts in splits.items():
        data[f"split-{code}"] = parts
    return client.post(reverse("taxonomy:mappings"), data)


def test_saving_a_split_stores_one_row_per_part(client, manager, mast_version, v2):
    client.force_login(manager)
    r = post_mapping(client, mast_version, v2, splits={"2.6": ["2.7"]})
    assert r.status_code == 302
    rows = set(
        CrossMapping.objects.filter(source=mast_version, target=v2, old_code="2.6").values_list("new_code", "kind")
    )
    assert rows == {("2.6", "split"), ("2.7", "split")}


def test_a_split_makes_present_unknown_and_counts_it(client, manager, mast_version, v2):
    client.force_login(manager)
    post_mapping(client, mast_version, v2, splits={"2.6": ["2.7"]})
    mapper = VersionMapper(v2)
    out = mapper.map(mast_version.pk, {"2.6": 1, "1.1": 0})
    assert out["2.6"] is None and out["2.7"] is None and out["1.1"] == 0
    assert mapper.by_version[mast_version.pk].unknown == 1


def test_the_editor_shows_a_stored_split_with_its_parts_ticked(client, manager, mast_version, v2):
    client.force_login(manager)
    post_mapping(client, mast_version, v2, splits={"2.6": ["2.7"]})
    page = client.get(reverse("taxonomy:mappings") + f"?source={mast_version.pk}&target={v2.pk}").content.decode()
    assert "<b>split</b> into 2.6, 2.7" in page
    assert 'name="split-2.6" value="2.7" checked' in page
    assert 'name="split-2.6" value="2.6" checked' not in page  # the first part is the select's


def test_saving_again_without_the_boxes_undoes_the_split(client, manager, mast_version, v2):
    client.force_login(manager)
    post_mapping(client, mast_version, v2, splits={"2.6": ["2.7"]})
    post_mapping(client, mast_version, v2, splits={})
    rows = set(
        CrossMapping.objects.filter(source=mast_version, target=v2, old_code="2.6").values_list("new_code", "kind")
    )
    assert rows == {("2.6", "same")}
