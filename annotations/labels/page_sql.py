"""The labelling page's reads in plain SQL (PostgreSQL).

Every trace an annotator opens is one GET of this page. With the ORM, building and compiling its
dozen queries cost the web process more than PostgreSQL spent answering them (bench/bench_pages.py),
as with the autosave (``annotations.labels.sql``). Here: the project, its taxonomy version, my role
and the trace (without its text) in one statement; the round that would take me elsewhere and
whether I have submitted an annotation of the trace in one more. Rules stay in the callers
(``project_access_check``, ``anchoring_holds_back``'s rule, the view); this module only reads rows.
"""

from __future__ import annotations

from annotations.labels.selectors import open_code_list
from annotations.models import Annotation, Rater, Round, RoundAnnotator, RoundTrace
from taxonomy.models import Taxonomy, TaxonomyVersion
from traces.models import Membership, Project, Trace
from traces.sqlrows import model_from_row, model_select, model_width, sql_fetchone

ANN, RATER, ROUND = (m._meta.db_table for m in (Annotation, Rater, Round))
ROUND_TRACE, ROUND_ANNOTATOR = RoundTrace._meta.db_table, RoundAnnotator._meta.db_table
PROJECT, VERSION, TAXONOMY, MEMBERSHIP, TRACE = (
    m._meta.db_table for m in (Project, TaxonomyVersion, Taxonomy, Membership, Trace)
)
TRACE_DEFERRED = ("raw_text",)  # tens of MB for the largest traces: never on a page view


def page_target(
    *, slug: str, user_id: int | None, trace_id: int | None
) -> tuple[Project | None, str | None, Trace | None]:
    """The project (with its taxonomy version and taxonomy), my membership role in it and its trace
    ``trace_id`` without the raw text (deferred, as ``trace_get`` reads it), in one statement; None
    for what is not there."""
    sql = (
        f"SELECT {model_select(Project, 'p')}, {model_select(TaxonomyVersion, 'v')}, {model_select(Taxonomy, 'x')},"  # noqa: S608
        f" m.role, {model_select(Trace, 't', TRACE_DEFERRED)}"
        f" FROM {PROJECT} p LEFT JOIN {VERSION} v ON v.id = p.taxonomy_version_id"
        f" LEFT JOIN {TAXONOMY} x ON x.id = v.taxonomy_id"
        f" LEFT JOIN {MEMBERSHIP} m ON m.project_id = p.id AND m.user_id = %s"
        f" LEFT JOIN {TRACE} t ON t.id = %s AND t.project_id = p.id"
        " WHERE p.slug = %s"
    )
    row = sql_fetchone(sql, [user_id, trace_id, slug])
    if row is None:
        return None, None, None
    n_p, n_v, n_x = model_width(Project), model_width(TaxonomyVersion), model_width(Taxonomy)
    project = model_from_row(Project, row[:n_p])
    at = n_p
    if row[at] is not None:
        version = model_from_row(TaxonomyVersion, row[at : at + n_v])
        version.taxonomy = model_from_row(Taxonomy, row[at + n_v : at + n_v + n_x])
        project.taxonomy_version = version
    else:
        project.taxonomy_version = None
    at += n_v + n_x
    role = row[at]
    trace = None
    if row[at + 1] is not None:
        trace = model_from_row(Trace, row[at + 1 :], TRACE_DEFERRED)
        trace.project = project
    return project, role, trace


def page_mine(*, trace_id: int, user_id: int, round_states: tuple[str, ...]) -> tuple[int | None, bool]:
    """(the oldest round in ``round_states`` holding the trace where I annotate, or None; whether I
    have submitted an annotation of the trace, in any version or round)."""
    marks = ", ".join(["%s"] * len(round_states))
    sql = (
        f"SELECT (SELECT r.id FROM {ROUND} r"  # noqa: S608
        f" JOIN {ROUND_TRACE} rt ON rt.round_id = r.id AND rt.trace_id = %s"
        f" WHERE r.state IN ({marks})"
        f" AND EXISTS (SELECT 1 FROM {ROUND_ANNOTATOR} rn WHERE rn.round_id = r.id AND rn.user_id = %s)"
        " ORDER BY r.created_at, r.id LIMIT 1),"
        f" EXISTS (SELECT 1 FROM {ANN} a JOIN {RATER} ra ON ra.id = a.rater_id"
        " WHERE a.trace_id = %s AND ra.user_id = %s AND a.state = %s)"
    )
    row = sql_fetchone(sql, [trace_id, *round_states, user_id, trace_id, user_id, Annotation.State.SUBMITTED])
    return row[0], bool(row[1])


def page_open_codes(*, project: Project, user, role: str, limit: int = 500) -> list[str]:
    """The names of ``open_code_list(project=..., user=...)`` in its order (most used first, then
    name), the first ``limit``. The blind rule's filter (``visibility.work_visible``) is the one
    definition of whose codes a rater may know, so this reads through it, not a copy of it."""
    return list(open_code_list(project=project, user=user, role=role).values_list("name", flat=True)[:limit])
