"""The two checks every write to a round starts with: lock the round's row, and require a manager.

Their own module so that every service of the area (services.py, attribution.py) imports them
without importing each other.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from annotations.models import Round
from traces.models import Project
from traces.projects.selectors import user_can


def round_lock(rnd: Round) -> Round:
    """The round, read again under a row lock (with its version, taxonomy and project)."""
    return Round.objects.select_for_update().select_related("taxonomy_version__taxonomy", "project").get(pk=rnd.pk)


def round_manager_require(project: Project, by) -> None:
    """Refuse unless `by` manages the project (None: a system call, allowed)."""
    if by is not None and not user_can(user=by, project=project, capability="manage"):
        raise ValidationError(f"Only managers of {project.name} run rounds.")
