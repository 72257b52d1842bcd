"""The trace page at 20 MB: a fixed number of queries and a bounded page, whatever the trace's size."""

import pytest
from django.urls import reverse

from tests.traces.viewer_factories import trace_of_mb

pytestmark = pytest.mark.django_db


@pytest.fixture
def trace_20mb(project):
    return trace_of_mb(project, 20)


def test_trace_page_at_20_mb_makes_six_queries_and_stays_small(client, viewer, trace_20mb, django_assert_num_queries):
    assert trace_20mb.size_bytes > 19 * 1024**2 and trace_20mb.n_steps > 20000
    client.force_login(viewer)
    # session, user, project, role, trace (without its text), first window of steps
    with django_assert_num_queries(6):
        r = client.get(reverse("trace_detail", args=["demo", trace_20mb.pk]))
    assert r.status_code == 200
    assert len(r.content) < 120 * 1024  # the first screens only; no outline inline
