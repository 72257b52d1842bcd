"""Taxonomy pages and API by role: everyone signed in reads, managers and staff edit."""

import pytest
from django.urls import reverse

from taxonomy.models import TaxonomyVersion


@pytest.fixture
def users(manager, annotator, viewer, outsider):
    return {"manager": manager, "annotator": annotator, "viewer": viewer, "outsider": outsider}


@pytest.mark.parametrize("role", ["manager", "annotator", "viewer", "outsider"])
def test_everyone_signed_in_reads_the_library(client, users, mast_version, role):
    client.force_login(users[role])
    assert client.get(reverse("taxonomy:list")).status_code == 200
    assert client.get(reverse("taxonomy:version", args=["mast", 1])).status_code == 200
    assert client.get(reverse("taxonomy:diff", args=["mast"])).status_code == 200
    assert client.get(reverse("taxonomy:export", args=["mast", 1])).json()["modes"][2]["code"] == "1.3"


@pytest.mark.parametrize(("role", "status"), [("manager", 302), ("annotator", 403), ("viewer", 403), ("outsider", 403)])
def test_only_managers_draft_a_new_version(client, users, mast_version, role, status):
    client.force_login(users[role])
    assert client.post(reverse("taxonomy:draft", args=["mast", 1])).status_code == status
    assert TaxonomyVersion.objects.filter(taxonomy=mast_version.taxonomy).count() == (2 if role == "manager" else 1)


def test_editing_a_published_version_through_the_page_is_refused(client, manager, mast_version):
    client.force_login(manager)
    client.post(
        reverse("taxonomy:mode_edit", args=["mast", 1, "1.1"]), {"name": "X", "definition": "changed"}, follow=True
    )
    assert mast_version.modes.get(code="1.1").definition != "changed"


def test_structural_change_page_records_the_mapping(client, manager, mast_version):
    client.force_login(manager)
    client.post(reverse("taxonomy:draft", args=["mast", 1]))
    response = client.post(
        reverse("taxonomy:change", args=["mast", 2]),
        {"op": "merge", "codes": "3.2, 3.3", "new_code": "3.2", "name": "Bad checks", "definition": "Wrong."},
        follow=True,
    )
    assert "Change applied" in response.content.decode()
    draft = TaxonomyVersion.objects.get(taxonomy=mast_version.taxonomy, number=2)
    assert sorted(draft.mappings.filter(kind="merge").values_list("old_code", flat=True)) == ["3.2", "3.3"]


def test_bad_structural_change_shows_the_reason_and_changes_nothing(client, manager, mast_version):
    client.force_login(manager)
    client.post(reverse("taxonomy:draft", args=["mast", 1]))
    response = client.post(
        reverse("taxonomy:change", args=["mast", 2]),
        {"op": "add", "code": "1.1", "name": "dup", "definition": "dup"},
        follow=True,
    )
    assert "already exists" in response.content.decode()
    assert TaxonomyVersion.objects.get(number=2, taxonomy=mast_version.taxonomy).modes.count() == 14


def test_taxonomy_api_lists_versions_paginated_with_modes_in_detail(api_client, annotator, mast_version):
    api_client.force_authenticate(annotator)
    body = api_client.get("/api/taxonomy-versions/").json()
    assert body["count"] >= 1 and "results" in body
    detail = api_client.get(f"/api/taxonomy-versions/{mast_version.pk}/").json()
    assert [m["code"] for m in detail["modes"]][:3] == ["1.1", "1.2", "1.3"]
