"""The labelling page at 20 MB: a fixed number of queries, never the trace's text."""

import pytest
from django.urls import reverse

from annotations.labels.services import annotation_get_or_create, annotation_save
from tests.traces.viewer_factories import trace_of_mb

pytestmark = pytest.mark.django_db


def test_labelling_page_at_20_mb_makes_a_fixed_number_of_queries(client, project, annotator, django_assert_num_queries):
    trace = trace_of_mb(project, 20)
    assert trace.size_bytes > 19 * 1024**2
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    labels = [{"code": "1.1", "decision": "present", "evidence": [{"step": 3}], "rationale": "off spec"}]
    annotation_save(
        annotation=ann, by=annotator, base_revision=0, labels=labels, task_success="no", notes="", open_codes=["x"]
    )
    client.force_login(annotator)
    url = reverse("annotations:workspace", args=[project.slug, trace.pk])
    client.get(url)
    # session, user; project + version + my role + trace without its text (one plain-SQL statement);
    # the round that would take me elsewhere + whether I submitted (one); my annotation with its
    # attribution, sent with the read of its labels + open codes (one round trip); the project's open
    # codes; the first window of steps. Others' annotations are held back until I submit (no query).
    # Was 13 with the ORM selectors, 8 with my annotation and its labels in two round trips.
    with django_assert_num_queries(7) as ctx:
        r = client.get(url)
    assert r.status_code == 200
    assert not any("raw_text" in q["sql"] for q in ctx.captured_queries)
    assert len(r.content) < 160 * 1024
