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
