"""What the trace list counts as labelled: a person has submitted labels for the trace.

Imported sources and LLM judges do not count: a MAST-Data import would otherwise mark every
trace labelled. Registered with ``traces.viewer.label_state.trace_label_state_register`` in
``AnnotationsConfig.ready()``, so traces never imports this app.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotations.models import Annotation, Rater
from traces.models import Project


def labelling_annotations(*, user, project: Project) -> QuerySet[Annotation]:
    """The annotations that make their trace labelled: submitted, by a human rater.

    Every member sees the same state for now; ``user`` and ``project`` are there for rules that
    depend on who is looking. The trace list narrows this to each row's trace (by ``trace``),
    which also keeps it inside the project.
    """
    return Annotation.objects.filter(state=Annotation.State.SUBMITTED, rater__kind=Rater.Kind.HUMAN)
