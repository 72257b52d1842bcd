""" "What to try" notes on categories and modes (issue 31): seeded on MAST's categories, versioned
with the definition (copied into a draft, frozen once published, in the export file and the API),
edited on the draft's pages; a new note alone does not mark the mode's definition as edited."""

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.urls import reverse

from taxonomy import mast_v1, services
from taxonomy.models import Category, TaxonomyVersion

pytestmark = pytest.mark.django_db


def test_mast_categories_start_with_the_teams_notes_and_they_are_frozen(mast_version):
    notes = dict(mast_version.categories.values_list("code", "what_to_try"))
    assert notes == mast_v1.WHAT_TO_TRY
    with pytest.raises(ValidationError, match="published"):
        services.category_edit(category=mast_version.categories.get(code="1"), what_to_try="x")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():  # the database refuses too
        Category.objects.filter(version=mast_version, code="1").update(what_to_try="x")


def test_a_draft_copies_the_notes_and_edits_them_without_touching_the_mapping(mast_version):
    draft = services.version_draft_from(source=mast_version)
    assert dict(draft.categories.values_list("code", "what_to_try")) == mast_v1.WHAT_TO_TRY
    mode = draft.modes.get(code="3.2")
    services.mode_edit(mode=mode, what_to_try="Run the program on the task's own example before approving.")
    assert draft.mappings.get(new_code="3.2").kind == "same"  # the meaning did not change
    services.mode_edit(mode=mode, definition="A reviewer approves without running anything.")
    assert draft.mappings.get(new_code="3.2").kind == "edit"
    services.category_edit(category=draft.categories.get(code="3"), what_to_try="A verifier agent.")

    exported = services.version_export(version=draft)
    assert next(c for c in exported["categories"] if c["code"] == "3")["what_to_try"] == "A verifier agent."
    assert next(m for m in exported["modes"] if m["code"] == "3.2")["what_to_try"].startswith("Run the program")
    exported.update(name="Round trip", parent_version=None, mapping=[])
    again = services.version_import(data=exported)
    assert again.categories.get(code="3").what_to_try == "A verifier agent."
    assert again.modes.get(code="3.2").what_to_try.startswith("Run the program")


def test_the_pages_edit_a_drafts_category_note_and_show_it(client, manager, mast_version):
    client.force_login(manager)
    client.post(reverse("taxonomy:draft", args=["mast", 1]))
    url = reverse("taxonomy:category_edit", args=["mast", 2, "2"])
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {"name": "Inter-Agent Misalignment", "description": "", "what_to_try": "Hand-off <contracts>."},
        follow=True,
    )
    assert "Category 2 updated" in response.content.decode()
    page = client.get(reverse("taxonomy:version", args=["mast", 2])).content.decode()
    assert "Hand-off &lt;contracts&gt;." in page  # escaped
    assert TaxonomyVersion.objects.get(number=2, taxonomy=mast_version.taxonomy).categories.get(code="2").what_to_try
    # the published version's category page refuses and changes nothing
    client.post(reverse("taxonomy:category_edit", args=["mast", 1, "2"]), {"name": "X", "what_to_try": "y"})
    assert mast_version.categories.get(code="2").what_to_try == mast_v1.WHAT_TO_TRY["2"]


def test_the_api_shows_the_notes(api_client, annotator, mast_version):
    api_client.force_authenticate(annotator)
    data = api_client.get(f"/api/taxonomy-versions/{mast_version.pk}/").json()
    assert data["categories"][0]["what_to_try"] == mast_v1.WHAT_TO_TRY["1"]
    assert "what_to_try" in data["modes"][0]
