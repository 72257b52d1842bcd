"""The labelling page's plain-SQL reads give what the ORM gives, and the page still escapes trace text."""

import json

import pytest
from django.urls import reverse

from annotations.labels.page_sql import page_mine, page_target
from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from tests.annotations.workspace_factories import all_labels, make_round, make_trace
from traces.models import Project, Step, Trace

pytestmark = pytest.mark.django_db


def test_page_target_reads_project_version_role_and_trace_as_the_orm_does(project, annotator):
    trace = make_trace(project)
    got_project, role, got_trace = page_target(slug=project.slug, user_id=annotator.pk, trace_id=trace.pk)
    want = Project.objects.select_related("taxonomy_version__taxonomy").get(pk=project.pk)
    assert role == "annotator"
    for f in Project._meta.concrete_fields:
        assert getattr(got_project, f.attname) == getattr(want, f.attname), f.name
    assert got_project.taxonomy_version.label == want.taxonomy_version.label
    assert "raw_text" in got_trace.get_deferred_fields()
    want_trace = Trace.objects.defer("raw_text").get(pk=trace.pk)
    for f in Trace._meta.concrete_fields:
        if f.attname != "raw_text":
            assert getattr(got_trace, f.attname) == getattr(want_trace, f.attname), f.name
    assert got_trace.project is got_project
    # another project's trace, a stranger, no such project
    assert page_target(slug=project.slug, user_id=annotator.pk, trace_id=10**12)[2] is None
    assert page_target(slug=project.slug, user_id=None, trace_id=trace.pk)[1] is None
    assert page_target(slug="no-such-project", user_id=annotator.pk, trace_id=trace.pk) == (None, None, None)


def test_page_mine_says_whether_i_submitted_this_trace(project, annotator):
    trace = make_trace(project)
    assert page_mine(trace_id=trace.pk, user_id=annotator.pk, round_states=("open", "review")) == (None, False)
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    labels = all_labels(project.taxonomy_version)
    annotation_save(
        annotation=ann, by=annotator, base_revision=0, labels=labels, task_success="no", notes="", open_codes=[]
    )
    from annotations.labels.services import annotation_submit

    annotation_submit(annotation=ann, by=annotator, base_revision=1)
    assert page_mine(trace_id=trace.pk, user_id=annotator.pk, round_states=("open", "review")) == (None, True)
    rnd = make_round(project, traces=[trace], annotators=[annotator], state="open")
    assert page_mine(trace_id=trace.pk, user_id=annotator.pk, round_states=("open", "review")) == (rnd.pk, True)
    assert page_mine(trace_id=trace.pk, user_id=annotator.pk, round_states=("review",)) == (None, True)


def test_labelling_page_escapes_agent_and_kind_of_a_step(client, project, annotator):
    trace = make_trace(project)
    Step.objects.filter(trace=trace, index=0).update(agent='<img src=x onerror="alert(1)">')
    client.force_login(annotator)
    r = client.get(reverse("annotations:workspace", args=[project.slug, trace.pk]))
    html = r.content.decode()
    assert r.status_code == 200
    assert '<img src=x onerror="alert(1)">' not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_page_open_codes_are_open_code_list_for_annotators_and_managers(project, annotator, annotator2, manager):
    from annotations.labels.page_sql import page_open_codes
    from annotations.labels.selectors import open_code_list
    from annotations.models import OpenCode
    from tests.annotations.workspace_factories import make_llm_annotation

    blind, other, third = make_trace(project), make_trace(project), make_trace(project)

    def save(user, trace, codes):
        ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=project.taxonomy_version)
        annotation_save(
            annotation=ann,
            by=user,
            base_revision=ann.revision,
            labels=[],
            task_success="no",
            notes="",
            open_codes=codes,
        )

    # outside-round rows on a trace that then goes into an open round (blind from then on)
    save(annotator2, blind, ["secret", "shared"])
    save(annotator, blind, ["mine"])
    save(annotator2, other, ["shared", "zeta"])
    save(annotator, third, ["shared", "alpha"])
    llm = make_llm_annotation(blind, codes=())
    llm.open_codes.add(OpenCode.objects.create(project=project, name="judge-tag"))
    OpenCode.objects.create(project=project, name="unused")
    make_round(project, traces=[blind], annotators=[annotator, annotator2, manager], state="open")
    from tests.factories import MembershipFactory, UserFactory

    lead = UserFactory(username="lead")  # a manager who is not one of the round's annotators
    MembershipFactory(project=project, user=lead, role="manager")
    assert "secret" in page_open_codes(project=project, user=lead, role="manager")
    for user, role in ((annotator, "annotator"), (annotator2, "annotator"), (manager, "manager"), (lead, "manager")):
        want = list(open_code_list(project=project, user=user).values_list("name", flat=True)[:500])
        assert page_open_codes(project=project, user=user, role=role) == want, user.username
    # her own codes only: ann2's outside rounds ("zeta", and her use of "shared") are another
    # human's labels that the blind rule does not show her (issue 27)
    assert page_open_codes(project=project, user=annotator, role="annotator") == ["alpha", "mine", "shared"]
    assert page_open_codes(project=project, user=annotator, role="annotator", limit=2) == ["alpha", "mine"]


@pytest.mark.parametrize(
    ("round_state", "reopenable"), [(None, True), ("open", True), ("review", False), ("closed", False)]
)
def test_a_submitted_annotation_shows_read_only_and_reopen_only_while_allowed(
    client, project, annotator, round_state, reopenable
):
    trace = make_trace(project, title="submitted")
    rnd = make_round(project, traces=[trace], annotators=[annotator]) if round_state else None
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version, round=rnd)
    ann = annotation_save(annotation=ann, by=annotator, base_revision=0, labels=all_labels(project.taxonomy_version))
    annotation_submit(annotation=ann, by=annotator, base_revision=ann.revision)
    if rnd is not None:
        rnd.state = round_state
        rnd.save()
    client.force_login(annotator)
    url = reverse("annotations:workspace", args=[project.slug, trace.pk]) + (f"?round={rnd.pk}" if rnd else "")
    page = client.get(url).content.decode()
    config = json.loads(page.split('<script id="ws-config" type="application/json">')[1].split("</script>")[0])
    assert config["locked"] is True
    assert ('id="ws-reopen"' in page) is reopenable
    if round_state == "review":
        assert "is in review: submitted labels can no longer be reopened or changed" in page
