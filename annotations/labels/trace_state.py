"""What the trace list counts as labelled: a person has submitted labels for the trace.

Imported sources and LLM judges do not count: a MAST-Data import would otherwise mark every
trace labelled. Registered with ``traces.viewer.label_state.trace_label_state_register`` in
``AnnotationsConfig.ready()``, so traces never imports this app.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotations.labels.visibility import blind_trace_ids
from annotations.models import Annotation, Rater
from traces.models import Project


def labelling_annotations(*, user, project: Project) -> QuerySet[Annotation]:
    """The annotations that make their trace labelled for ``user``: submitted, by a human rater.

    The blind rule applies: on a trace of a draft or open round only the user's own submission
    counts, so the filter and the column never tell that another annotator has finished a trace
    that is only in that round. The trace list narrows this to each row's trace (by ``trace``),
    which also keeps it inside the project.
    """
    others_blind = Q(trace_id__in=blind_trace_ids(user=user, project=project)) & ~Q(rater__user_id=user.pk)
    return Annotation.objects.filter(state=Annotation.State.SUBMITTED, rater__kind=Rater.Kind.HUMAN).exclude(
        others_blind
    )
