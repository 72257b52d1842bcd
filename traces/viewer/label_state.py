"""Which traces the trace list shows as labelled: a registry, so traces never imports annotations.

Labels belong to the annotations app, which depends on traces and not the other way round. It
registers the one definition of "labelled" with ``trace_label_state_register(fn)``:
``fn(*, user, project)`` returns a queryset of rows that point at a trace through a ``trace``
foreign key (the annotations that make a trace labelled), and a trace is labelled for ``user``
when such a row exists. ``trace_label_state`` correlates that queryset with each row of the list
in one EXISTS subquery, so the list's ``is_labelled`` column and its "labelled" filter cost no
query of their own, and each row is one index lookup. ``user`` and ``project`` are passed so the
definition can depend on who is looking. With nothing registered (traces alone), no trace is
labelled.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import BooleanField, Exists, Expression, OuterRef, QuerySet, Value

from traces.models import Project

_LABELLED: Callable[..., QuerySet] | None = None


def trace_label_state_register(fn: Callable[..., QuerySet]) -> None:
    """Set what "labelled" means; registering again replaces it (one app owns the labels)."""
    global _LABELLED
    _LABELLED = fn


def trace_label_state_of(*, user, project: Project, trace_ids: list[int]) -> set[int]:
    """Which of these traces are labelled for ``user``, in one query (for a page of the list).

    A page asks this instead of carrying ``trace_label_state`` in its SELECT: with 100,000 traces
    PostgreSQL plans that EXISTS as one hash over every annotation of the project (it cannot know
    that only the 50 rows of the page need it), ~1 s; here it is 50 index lookups."""
    if _LABELLED is None or not trace_ids:
        return set()
    return set(_LABELLED(user=user, project=project).filter(trace_id__in=trace_ids).values_list("trace_id", flat=True))


def trace_label_state(*, user, project: Project) -> Expression:
    """A boolean over the rows of a Trace queryset: is the trace labelled, as ``user`` may know it."""
    if _LABELLED is None:
        return Value(False, output_field=BooleanField())
    return Exists(_LABELLED(user=user, project=project).filter(trace=OuterRef("pk")))
