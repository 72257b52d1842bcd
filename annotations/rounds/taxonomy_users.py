"""Rounds as users of taxonomy versions, for taxonomy.access (registered in annotations' ready())."""

from __future__ import annotations

from annotations.models import Round
from traces.models import Membership


def version_used_by_managed_round(*, version, user) -> bool:
    """Does ``user`` manage a project that has a calibration round on ``version``?"""
    projects = Membership.objects.filter(user_id=user.pk, role="manager").values("project_id")
    return Round.objects.filter(taxonomy_version=version, project_id__in=projects).exists()
