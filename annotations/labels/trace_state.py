"""What the trace list counts as labelled: a person has submitted labels for the trace.

Imported sources and LLM judges do not count: a MAST-Data import would otherwise mark every
trace labelled. Registered with ``traces.viewer.label_state.trace_label_state_register`` in
``AnnotationsConfig.ready()``, so traces never imports this app.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotations.labels.visibility import work_visible
from annotations.models import Annotation, Rater
from traces.models import Project


def labelling_annotations(*, user, project: Project) -> QuerySet[Annotation]:
    """The annotations that make their trace labelled for ``user``: submitted, by a human rater,
    and ones the blind rule lets her see (``work_visible``, anti-anchoring included).

    So the filter and the column never tell that another rater has finished a trace whose labels
    she may not see: one being labelled blind now, another human's outside rounds, a round the
    manager keeps hidden. For an annotator that is her own submissions. The trace list narrows this
    to each row's trace (by ``trace``), which also keeps it inside the project.
    """
    return Annotation.objects.filter(state=Annotation.State.SUBMITTED, rater__kind=Rater.Kind.HUMAN).filter(
        work_visible(user=user, project=project, anchoring=True)
    )
