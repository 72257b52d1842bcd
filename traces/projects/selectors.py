"""Reads about projects, memberships and traces, always scoped to what a user may see."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import Http404
from django.urls import reverse

from taxonomy.selectors import version_is_newer
from traces.models import Membership, Project

# What each role may do in a project. Site admins (superusers) may do everything everywhere.
CAPABILITIES: dict[str, frozenset[str]] = {
    Membership.Role.VIEWER: frozenset({"view"}),
    Membership.Role.ANNOTATOR: frozenset({"view", "annotate"}),
    Membership.Role.MANAGER: frozenset({"view", "annotate", "manage"}),
}


def project_list_for_user(*, user) -> QuerySet[Project]:
    qs = Project.objects.all() if user.is_superuser else Project.objects.filter(memberships__user=user)
    return (
        qs.select_related("taxonomy_version__taxonomy")
        .annotate(n_traces=Count("traces", distinct=True))
        .order_by("name")
    )


def project_role(*, user, project: Project) -> str | None:
    """The user's role in the project ("manager" for site admins), or None for non-members."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Membership.Role.MANAGER
    cache = getattr(user, "_project_roles", None)
    if cache is None:
        cache = user._project_roles = {}
    if project.pk not in cache:
        cache[project.pk] = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    return cache[project.pk]


def user_can(*, user, project: Project, capability: str) -> bool:
    role = project_role(user=user, project=project)
    return bool(role) and capability in CAPABILITIES[role]


def project_get_for_user(*, user, slug: str, capability: str = "view") -> tuple[Project, str]:
    """The project and the user's role; 404 for non-members (no leak), 403 for a missing right."""
    project = Project.objects.select_related("taxonomy_version__taxonomy").filter(slug=slug).first()
    role = project_role(user=user, project=project) if project is not None else None
    return project, project_access_check(user=user, project=project, role=role, capability=capability)


def project_access_check(*, user, project: Project | None, role: str | None, capability: str) -> str:
    """The rule of ``project_get_for_user`` for a project and membership role already read (by a
    caller that reads them with other rows in one statement): 404 for no project and non-members,
    403 for a missing right; the role is remembered for ``project_role``. Returns the role."""
    if project is None:
        raise Http404("No such project.")
    if user.is_authenticated and user.is_superuser:
        role = Membership.Role.MANAGER
    elif not user.is_authenticated:
        role = None
    if role is None:
        raise Http404("No such project.")
    if user.is_authenticated:
        cache = getattr(user, "_project_roles", None)
        if cache is None:
            cache = user._project_roles = {}
        cache[project.pk] = role
    if capability not in CAPABILITIES[role]:
        raise PermissionDenied(f"Your role in {project.name} ({role}) does not allow this.")
    return role


def project_members(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("role", "user__username")


def projects_that_could_adopt(*, version, user) -> list[dict]:
    """Projects ``user`` manages whose working version ``version`` is newer than (taxonomy.access offers)."""


    projects = Project.objects.select_related("taxonomy_version__taxonomy").order_by("name")
    if not user.is_superuser:
        projects = projects.filter(memberships__user=user, memberships__role=Membership.Role.MANAGER)
    return [
        {
            "project": p.name,
            "current": p.taxonomy_version.label,
            "url": reverse("project_working_version", kwargs={"slug": p.slug}),
        }
        for p in projects
        if p.taxonomy_version is not None and version_is_newer(version=version, than=p.taxonomy_version)
    ]


def version_used_by_managed_project(*, version, user) -> bool:
    """Does ``user`` manage a project whose taxonomy version is ``version``? (taxonomy.access)"""
    return Membership.objects.filter(user_id=user.pk, role="manager", project__taxonomy_version=version).exists()
