"""Who may change a taxonomy draft (taxonomy/access.py): staff, its owner, and the managers of the
projects that use it (as project version or through a round). Everyone else gets 403 and nothing changes."""

import pytest
from django.urls import reverse

from annotations.models import Round
from taxonomy.models import TaxonomyVersion
from taxonomy.services import version_draft_from
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

MANAGER_ROLES = ["staff", "owner", "manager_of_project_using_it", "manager_of_project_with_round_on_it"]
REFUSED_ROLES = ["manager_of_other_project", "annotator_of_project_using_it", "outsider"]


@pytest.fixture
def draft_world(db, mast_version):
    owner = UserFactory(username="owner")
    MembershipFactory(project=ProjectFactory(slug="owners", taxonomy_version=mast_version), user=owner, role="manager")
    draft = version_draft_from(source=mast_version, by=owner)
    using = ProjectFactory(slug="using", taxonomy_version=draft)
    with_round = ProjectFactory(slug="with-round", taxonomy_version=mast_version)
    Round.objects.create(project=with_round, name="R on the draft", taxonomy_version=draft)
    other = ProjectFactory(slug="other", taxonomy_version=mast_version)
    staff = UserFactory(username="staff")
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    users = {"staff": staff, "owner": owner, "outsider": UserFactory(username="stranger")}
    for key, project, role in [
        ("manager_of_project_using_it", using, "manager"),
        ("manager_of_project_with_round_on_it", with_round, "manager"),
        ("manager_of_other_project", other, "manager"),
        ("annotator_of_project_using_it", using, "annotator"),
    ]:
        users[key] = UserFactory(username=key[:30])
        MembershipFactory(project=project, user=users[key], role=role)
    return draft, users


def _edit(client, draft):
    return client.post(
        reverse("taxonomy:mode_edit", args=[draft.taxonomy.slug, draft.number, "1.1"]),
        {"name": "Disobey task specification", "definition": "Edited by the test."},
    )


def _change(client, draft):
    return client.post(
        reverse("taxonomy:change", args=[draft.taxonomy.slug, draft.number]),
        {"op": "add", "code": "3.4", "name": "Added", "definition": "Added by the test."},
    )


def _publish(client, draft):
    return client.post(reverse("taxonomy:publish", args=[draft.taxonomy.slug, draft.number]))


@pytest.mark.parametrize("who", MANAGER_ROLES)
def test_owner_staff_and_managers_of_users_change_the_draft(client, draft_world, who):
    draft, users = draft_world
    client.force_login(users[who])
    assert _edit(client, draft).status_code == 302
    assert draft.modes.get(code="1.1").definition == "Edited by the test."
    assert _change(client, draft).status_code == 302
    assert draft.modes.filter(code="3.4").exists()
    assert _publish(client, draft).status_code == 302
    draft.refresh_from_db()
    assert draft.status == TaxonomyVersion.Status.PUBLISHED


@pytest.mark.parametrize("who", REFUSED_ROLES)
def test_other_users_cannot_change_a_draft_another_project_uses(client, draft_world, who):
    draft, users = draft_world
    before = list(draft.modes.values_list("code", "definition"))
    client.force_login(users[who])
    assert _edit(client, draft).status_code == 403
    assert _change(client, draft).status_code == 403
    assert _publish(client, draft).status_code == 403
    draft.refresh_from_db()
    assert draft.status == TaxonomyVersion.Status.DRAFT
    assert list(draft.modes.values_list("code", "definition")) == before


@pytest.mark.parametrize(("who", "sees_edit"), [("owner", True), ("manager_of_other_project", False)])
def test_version_page_offers_edit_only_to_those_who_may(client, draft_world, who, sees_edit):
    draft, users = draft_world
    client.force_login(users[who])
    html = client.get(reverse("taxonomy:version", args=[draft.taxonomy.slug, draft.number])).content.decode()
    edit_url = reverse("taxonomy:mode_edit", args=[draft.taxonomy.slug, draft.number, "1.1"])
    assert (edit_url in html) is sees_edit
    # Drafting one's own next version stays open to every manager.
    assert ("Draft next version" in html) is True


def test_a_manager_of_another_project_may_still_draft_their_own_version(client, draft_world):
    draft, users = draft_world
    client.force_login(users["manager_of_other_project"])
    assert client.post(reverse("taxonomy:draft", args=[draft.taxonomy.slug, draft.number])).status_code == 302
    mine = TaxonomyVersion.objects.get(taxonomy=draft.taxonomy, number=draft.number + 1)
    assert mine.created_by == users["manager_of_other_project"]
    client.force_login(users["manager_of_other_project"])
    assert _edit(client, mine).status_code == 302
