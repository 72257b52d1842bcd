"""A rater's labels as the dashboard's source: per trace and mode, the rater's latest annotation
(latest update, then the higher id) wins, read as one row of columns on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from annotations.analytics.selectors import label_matrix
from annotations.models import Annotation
from tests.annotations.releases_factories import annotate, closed_round, make_trace, other_rater

pytestmark = pytest.mark.django_db


def cell(M, trace, code):
    row = M.trace_ids.tolist().index(trace.pk)
    return M.X[row, M.codes.index(code)]


def test_the_raters_latest_annotation_wins_per_mode(project, manager, mast_version):
    t, u = make_trace(project), make_trace(project, mas_name="AG2")
    rnd = closed_round(project, mast_version, {t: set(), u: set()})
    judge = other_rater("judge-for-masks")
    outside = annotate(t, judge, mast_version, {"1.1": "present", "1.3": "absent"})
    in_round = annotate(t, judge, mast_version, {"1.1": "absent", "2.6": "present"}, round=rnd)
    annotate(u, judge, mast_version, {"3.3": "present", "1.2": "unsure"})
    now = timezone.now()
    Annotation.objects.filter(pk=outside.pk).update(updated_at=now)
    Annotation.objects.filter(pk=in_round.pk).update(updated_at=now - timedelta(hours=1))
    M = label_matrix(user=manager, project=project, source=str(judge.pk))
    assert cell(M, t, "1.1") == 1.0  # the later update wins
    assert cell(M, t, "2.6") == 1.0  # decided only by the older one: kept
    assert cell(M, u, "3.3") == 1.0 and np.isnan(cell(M, u, "1.2"))  # unsure is not known
    Annotation.objects.filter(pk=in_round.pk).update(updated_at=now + timedelta(hours=1))
    M = label_matrix(user=manager, project=project, source=str(judge.pk))
    assert cell(M, t, "1.1") == 0.0
    Annotation.objects.filter(pk__in=[outside.pk, in_round.pk]).update(updated_at=now)  # a tie: the higher id wins
    later = max(outside, in_round, key=lambda a: a.pk)
    M = label_matrix(user=manager, project=project, source=str(judge.pk))
    assert cell(M, t, "1.1") == (1.0 if later is outside else 0.0)
    assert M.mas_name.tolist() == ["ChatDev", "AG2"]


def test_a_raters_cached_labels_follow_what_the_member_may_see(project, manager, annotator, annotator2, mast_version):
    """The cache key of a rater's labels (``labels_fingerprint``) changes with every input of the
    blind rule, not only with the rater's annotations: the project's suggestions setting, a round
    that makes the member blind on a trace, the round going to review and being revealed."""
    from annotations.analytics.selectors import label_matrix_cached
    from annotations.rounds.services import round_start_review
    from tests.annotations.rounds_factories import make_open_round

    t, u = make_trace(project), make_trace(project, mas_name="AG2")
    judge = other_rater("judge-for-keys")
    annotate(t, judge, mast_version, {"1.1": "present"})
    annotate(u, judge, mast_version, {"1.1": "absent"})

    def seen():
        M = label_matrix_cached(user=annotator, project=project, source=str(judge.pk))
        return set(M.trace_ids.tolist())

    assert seen() == set()  # suggestions hidden from annotators
    project.reveal_suggestions = True
    project.save(update_fields=["reveal_suggestions"])
    assert seen() == {t.pk, u.pk}
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=[t])
    assert seen() == {u.pk}  # blind on t now
    annotate(t, judge, mast_version, {"1.1": "absent"}, round=rnd)
    assert seen() == {u.pk}  # a judge's label in the open round: still blind
    round_start_review(round=rnd, by=manager, force=True)
    assert seen() == {t.pk, u.pk}
    assert label_matrix_cached(user=manager, project=project, source=str(judge.pk)).trace_ids.size == 2
