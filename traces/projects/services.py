"""Writes on projects and memberships. Trace import lives in traces/importing.py."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.text import slugify

from taxonomy.models import TaxonomyVersion
from taxonomy.services import taxonomy_seed_mast
from traces.models import Membership, Project
from traces.projects.selectors import user_can

User = get_user_model()


@transaction.atomic
def project_create(
    *, name: str, slug: str = "", by=None, description: str = "", taxonomy_version: TaxonomyVersion | None = None
) -> Project:
    slug = slugify(slug or name)[:80]
    if not slug:
        raise ValidationError("A project needs a name.")
    if Project.objects.filter(slug=slug).exists():
        raise ValidationError(f"A project with the slug {slug!r} already exists.")
    project = Project(
        name=name.strip() or slug,
        slug=slug,
        description=description,
        created_by=by,
        taxonomy_version=taxonomy_version or taxonomy_seed_mast(),
    )
    project.full_clean()
    project.save()
    if by is not None:
        Membership.objects.create(project=project, user=by, role=Membership.Role.MANAGER)
    return project


def project_get_or_create(*, slug: str, name: str = "", by=None) -> tuple[Project, bool]:
    project = Project.objects.filter(slug=slug).first()
    if project:
        return project, False
    return project_create(name=name or slug, slug=slug, by=by), True


def membership_set(*, project: Project, user, role: str) -> Membership:
    """Add a member or change their role (an upsert: repeating it changes nothing)."""
    if role not in Membership.Role.values:
        raise ValidationError(f"Unknown role {role!r}; expected one of {', '.join(Membership.Role.values)}.")
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


def membership_remove(*, project: Project, user) -> None:
    remaining = project.memberships.filter(role=Membership.Role.MANAGER).exclude(user=user)
    if project.memberships.filter(user=user, role=Membership.Role.MANAGER).exists() and not remaining.exists():
        raise ValidationError("A project keeps at least one manager.")
    project.memberships.filter(user=user).delete()


@transaction.atomic
def project_settings_update(
    *,
    project: Project,
    by,
    name: str | None = None,
    description: str | None = None,
    reveal_suggestions: bool | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
) -> Project:
    """Change a project's settings (managers). ``taxonomy_version`` is the working version: the
    version annotators label with outside rounds, judge runs and every reader of labels default
    to. It must be published (a draft may still change under the labels)."""

    if by is not None and not user_can(user=by, project=project, capability="manage"):  # None: the system (demo, tests)
        raise PermissionDenied(f"Only managers of {project.name} change its settings.")
    locked = Project.objects.select_for_update().get(pk=project.pk)
    if name is not None:
        if not name.strip():
            raise ValidationError({"name": ["A project needs a name."]})
        locked.name = name.strip()
    if description is not None:
        locked.description = description
    if reveal_suggestions is not None:
        locked.reveal_suggestions = reveal_suggestions
    if taxonomy_version is not None:
        if not taxonomy_version.is_published:
            raise ValidationError(
                {
                    "taxonomy_version": [
                        f"{taxonomy_version.label} is a draft: publish it before making it the working version."
                    ]
                }
            )
        locked.taxonomy_version = taxonomy_version
    locked.full_clean()
    locked.save()
    project.__dict__.update({k: v for k, v in locked.__dict__.items() if not k.startswith("_")})
    project.taxonomy_version = locked.taxonomy_version
    return locked


def project_working_version_set(*, project: Project, version: TaxonomyVersion, by) -> Project:
    """Make ``version`` the project's working version (the offer after publishing, or a round on a newer version)."""
    return project_settings_update(project=project, by=by, taxonomy_version=version)
