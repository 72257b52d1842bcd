"""Site admins manage everything through Django admin: every registered model's pages open."""

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.factories import UserFactory


@pytest.fixture
def superuser(db):
    user = UserFactory(username="root", is_staff=True, is_superuser=True)
    return user


@pytest.mark.parametrize("model", list(admin.site._registry), ids=lambda m: m._meta.label)
def test_admin_changelist_opens(client, superuser, mast_version, model):
    client.force_login(superuser)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert client.get(url).status_code == 200


def test_every_model_of_our_apps_is_in_the_admin():
    from django.apps import apps

    ours = [m for app in ("taxonomy", "traces", "annotations") for m in apps.get_app_config(app).get_models()]
    inlined = {inline.model for model_admin in admin.site._registry.values() for inline in model_admin.inlines}
    missing = [m._meta.label for m in ours if m not in admin.site._registry and m not in inlined]
    assert missing == []


def test_published_version_is_read_only_in_admin(client, superuser, mast_version):
    client.force_login(superuser)
    url = reverse("admin:taxonomy_taxonomyversion_change", args=[mast_version.pk])
    html = client.get(url).content.decode()
    assert 'name="notes"' not in html  # rendered read-only, not as an input


def test_non_staff_cannot_open_admin(client, annotator):
    client.force_login(annotator)
    assert client.get("/admin/").status_code == 302
