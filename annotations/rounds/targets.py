"""The target version of a page, API call or export: which taxonomy version labels are shown in.

Every reader of labels (analytics, agreed labels, round comparison, releases, export_dataset,
judge runs) takes one, defaulting to the project's working version (``Project.taxonomy_version``),
and carries labels of every other version onto it (``taxonomy.mapping``). The choices offered are
the published versions connected to the working version by recorded mappings (so picking one
never shows an empty page for lack of a mapping), plus the versions of the project's rounds.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotations.models import Round
from taxonomy.mapping import mapping_path, version_graph
from taxonomy.models import TaxonomyVersion
from traces.models import Project


def target_version_choices(*, project: Project) -> QuerySet[TaxonomyVersion]:
    """Versions a reader may target in this project, working version first, then by taxonomy and number."""
    working = project.taxonomy_version_id
    ids: set[int] = set()
    if working:
        graph = version_graph()
        seen, stack = {working}, [working]
        while stack:
            v = stack.pop()
            for n, _how, _d in graph.get(v, ()):
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        ids |= seen
    rounds = Round.objects.filter(project=project).values("taxonomy_version_id")
    return (
        TaxonomyVersion.objects.filter(Q(pk__in=ids) | Q(pk__in=rounds), status=TaxonomyVersion.Status.PUBLISHED)
        .select_related("taxonomy")
        .order_by("taxonomy__name", "number")
    )


def target_version_resolve(*, project: Project, raw: str | int | None) -> TaxonomyVersion:
    """The version a request asked for (an id), or the working version when it asked for none.

    Raises ValueError with a message naming what is wrong (callers turn it into a 400 or a form error)."""
    if raw in (None, ""):
        if project.taxonomy_version is None:
            raise ValueError("the project has no working taxonomy version; pass one")
        return project.taxonomy_version
    text = str(raw).strip()
    if not text.isdigit():
        raise ValueError(f"must be a taxonomy version id, not {text[:40]!r}")
    version = TaxonomyVersion.objects.select_related("taxonomy").filter(pk=int(text)).first()
    if version is None:
        raise ValueError(f"no taxonomy version has id {text}")
    return version


def target_is_connected(*, project: Project, version: TaxonomyVersion) -> bool:
    """Does a recorded mapping connect ``version`` with the working version?"""
    if project.taxonomy_version_id is None or version.pk == project.taxonomy_version_id:
        return True
    return mapping_path(source_id=project.taxonomy_version_id, target_id=version.pk) is not None
