"""Round pages: who may open what (the blind rule), the create form and its preview, the
report and disagreements pages, adjudication via htmx, and pinned query counts."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Adjudication, Round
from annotations.rounds.services import agreement_report_get, round_labels_import
from tests.annotations.rounds_factories import make_open_round, make_review_round, make_traces


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def traces(project):
    return make_traces(project, 3)


@pytest.fixture
def open_round(project, manager, annotator, annotator2, traces):
    from tests.annotations.rounds_factories import label_via_workspace

    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    label_via_workspace(round=rnd, user=annotator, trace=traces[0], present={"1.3"}, rationale="SECRET-ANN1-RATIONALE")
    return rnd


@pytest.fixture
def review_round(project, manager, annotator, annotator2, traces):
    return make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
    )


def url(name, rnd, **kw):
    return reverse(f"annotations:{name}", kwargs={"slug": rnd.project.slug, "pk": rnd.pk, **kw})


# ---------------------------------------------------------------- list and create


def test_round_list_shows_state_progress_and_kappa(review_round, viewer):
    html = client_for(viewer).get(reverse("annotations:round_list", kwargs={"slug": "demo"})).content.decode()
    assert "Round A" in html and "Review" in html and "100%" in html
    kappa = agreement_report_get(round=review_round).data["mean_pairwise_kappa"]["value"]
    assert f"{kappa:.2f}" in html


def test_round_list_is_404_for_outsiders(review_round, outsider):
    assert client_for(outsider).get(reverse("annotations:round_list", kwargs={"slug": "demo"})).status_code == 404


def test_round_list_query_count_does_not_grow_with_rounds(
    project, manager, annotator, annotator2, traces, django_assert_num_queries
):
    for i in range(4):
        make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces, name=f"R{i}")
    c = client_for(manager)
    list_url = reverse("annotations:round_list", kwargs={"slug": "demo"})
    c.get(list_url)
    # session, user, project, membership, rounds (one query with subqueries), the trend's rounds in review
    # or closed, which of them the user annotates (the report's access rule), which reports are withheld
    # from her (the blind rule), their reports and versions
    with django_assert_num_queries(10):
        assert c.get(list_url).status_code == 200


def test_annotators_cannot_create_rounds(project, annotator):
    r = client_for(annotator).get(reverse("annotations:round_new", kwargs={"slug": "demo"}))
    assert r.status_code == 403


def test_create_form_prints_no_template_comment(project, manager):
    html = client_for(manager).get(reverse("annotations:round_new", kwargs={"slug": "demo"})).content.decode()
    assert "{#" not in html and "#}" not in html  # a {# #} comment over several lines is printed


def test_create_form_makes_a_draft_round(project, manager, annotator, annotator2, traces):
    r = client_for(manager).post(
        reverse("annotations:round_new", kwargs={"slug": "demo"}),
        {
            "name": "Pilot",
            "taxonomy_version": project.taxonomy_version_id,
            "annotators": [annotator.pk, annotator2.pk],
            "method": "random",
            "n": 2,
            "seed": 4,
            "stratify_by": "framework",
            "reveal_in_review": "on",
        },
    )
    rnd = Round.objects.get(name="Pilot")
    assert r.status_code == 302 and rnd.state == "draft" and rnd.round_traces.count() == 2
    assert rnd.kind == Round.Kind.MODES  # the form's default


def test_create_form_makes_an_attribution_round(project, manager, annotator, annotator2, traces):
    new = reverse("annotations:round_new", kwargs={"slug": "demo"})
    assert "Failure attribution only" in client_for(manager).get(new).content.decode()
    body = {"name": "Who", "taxonomy_version": project.taxonomy_version_id, "annotators": [annotator.pk, annotator2.pk]}
    client_for(manager).post(new, {**body, "method": "random", "n": 2, "seed": 4, "kind": "attribution"})
    rnd = Round.objects.get(name="Who")
    assert rnd.kind == Round.Kind.ATTRIBUTION
    detail = client_for(manager).get(reverse("annotations:round_detail", kwargs={"slug": "demo", "pk": rnd.pk}))
    assert "failure attribution (the mode labels are context)" in detail.content.decode()


def test_create_form_shows_service_errors(project, manager, annotator, traces):
    r = client_for(manager).post(
        reverse("annotations:round_new", kwargs={"slug": "demo"}),
        {
            "name": "Solo",
            "taxonomy_version": project.taxonomy_version_id,
            "annotators": [annotator.pk],
            "method": "random",
            "n": 2,
            "seed": 1,
        },
    )
    assert r.status_code == 200 and "at least two annotators" in r.content.decode()


def test_sample_preview_lists_the_sample(project, manager, traces):
    r = client_for(manager).post(
        reverse("annotations:round_preview", kwargs={"slug": "demo"}),
        {"method": "stratified", "n": 3, "seed": 2, "stratify_by": "framework"},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert r.status_code == 200 and "<strong>3</strong> traces" in html and "stratified by framework" in html


def test_sample_preview_explains_bad_input(project, manager, traces):
    r = client_for(manager).post(
        reverse("annotations:round_preview", kwargs={"slug": "demo"}), {"method": "random", "n": 99, "seed": 2}
    )
    assert "larger than the number of traces" in r.content.decode()


# ---------------------------------------------------------------- the blind rule on pages


@pytest.mark.parametrize("page", ["round_report", "round_disagreements"])
def test_annotator_cannot_open_report_or_disagreements_while_open(open_round, annotator, annotator2, page):
    for user in (annotator, annotator2):
        assert client_for(user).get(url(page, open_round)).status_code == 403


@pytest.mark.parametrize("page", ["round_report", "round_disagreements"])
def test_viewer_cannot_open_report_while_open(open_round, viewer, page):
    assert client_for(viewer).get(url(page, open_round)).status_code == 403


def test_manager_who_annotates_an_open_round_is_blind_too(project, manager, annotator, traces):
    rnd = make_open_round(project, manager=manager, annotators=[manager, annotator], traces=traces, name="M")
    c = client_for(manager)
    assert c.get(url("round_report", rnd)).status_code == 403
    assert c.get(url("round_disagreements", rnd)).status_code == 403


def test_annotator_sees_their_open_rounds_marked_on_the_list(open_round, annotator):
    html = client_for(annotator).get(reverse("annotations:round_list", kwargs={"slug": "demo"})).content.decode()
    assert "you label" in html


def test_manager_sees_the_report_while_open(open_round, manager):
    assert client_for(manager).get(url("round_report", open_round)).status_code == 200


def test_annotator_never_sees_others_labels_on_the_detail_page_while_open(open_round, annotator2):
    html = client_for(annotator2).get(url("round_detail", open_round)).content.decode()
    assert "SECRET-ANN1-RATIONALE" not in html
    assert "Who has done what" not in html  # per-trace progress of others is for managers
    assert "1 / 3" in html  # counts are fine


def test_manager_sees_who_did_what(open_round, manager):
    html = client_for(manager).get(url("round_detail", open_round)).content.decode()
    assert "Who has done what" in html and 'title="submitted"' in html


def test_annotator_sees_others_labels_after_review_when_allowed(review_round, annotator2):
    r = client_for(annotator2).get(url("round_disagreements", review_round))
    assert r.status_code == 200 and "ann1 saw it" in r.content.decode()


def test_annotator_cannot_see_labels_in_review_when_not_allowed(project, manager, annotator, annotator2, traces):
    rnd = make_review_round(
        project,
        manager=manager,
        annotators=[annotator, annotator2],
        traces=traces,
        disagree_on=traces[:1],
        reveal_in_review=False,
    )
    assert client_for(annotator2).get(url("round_disagreements", rnd)).status_code == 403
    assert client_for(annotator2).get(url("round_report", rnd)).status_code == 403


def test_outsider_gets_404_on_round_pages(review_round, outsider):
    for page in ("round_detail", "round_report", "round_disagreements"):
        assert client_for(outsider).get(url(page, review_round)).status_code == 404


def test_round_of_another_project_is_404(review_round, manager):
    from tests.factories import MembershipFactory, ProjectFactory

    other = ProjectFactory(slug="other")
    MembershipFactory(project=other, user=manager, role="manager")
    r = client_for(manager).get(reverse("annotations:round_detail", kwargs={"slug": "other", "pk": review_round.pk}))
    assert r.status_code == 404


# ---------------------------------------------------------------- report and disagreements


def test_report_page_has_heatmap_per_mode_table_and_trend(review_round, manager):
    html = client_for(manager).get(url("round_report", review_round)).content.decode()
    assert "rd-heat" in html and "Per failure mode" in html and "Per category" in html
    # the round in review is on the trend, provisional
    assert html.count('class="rd-point rd-s-modes rd-provisional rd-current"') == 1
    assert "provisional: in review" in html
    assert "undefined" in html  # modes nobody marked present: kappa is 0/0, said so


def test_report_page_says_why_a_statistic_is_undefined(review_round, manager):
    html = client_for(manager).get(url("round_report", review_round)).content.decode()
    assert "Cohen&#x27;s kappa is undefined for every pair of raters" in html


def test_report_page_query_count_is_pinned(review_round, manager, django_assert_num_queries):
    c = client_for(manager)
    c.get(url("round_report", review_round))
    # session, user, project, membership, round, is-annotator, fingerprint (3), stored report,
    # extra raters, trend (rounds, the ones the user annotates, reports, versions), categories: the
    # stored report is not recomputed (and holds the mode
    # x rater view's prevalences), and the modes of the (published) version come from
    # version_modes' cache, filled by the first request.
    with django_assert_num_queries(20):  # +1: is the report withheld (shared traces); +1 the trend's withheld rounds
        assert c.get(url("round_report", review_round)).status_code == 200


def test_report_page_adds_a_non_human_rater(review_round, manager, traces):
    from annotations.models import Annotation, ModeLabel, Rater

    judge = Rater.objects.create(kind="llm", name="judge-z")
    for t in traces:
        ann = Annotation.objects.create(
            trace=t, rater=judge, taxonomy_version=review_round.taxonomy_version, state="submitted"
        )
        ModeLabel.objects.bulk_create(
            ModeLabel(annotation=ann, mode=m, decision="present" if m.code == "1.1" else "absent")
            for m in review_round.taxonomy_version.modes.all()
        )
    html = client_for(manager).get(url("round_report", review_round) + f"?rater={judge.pk}").content.decode()
    assert "judge-z" in html and "non-human" in html


def test_adjudication_form_records_the_decision_via_htmx(review_round, manager, traces):
    r = client_for(manager).post(
        url("disagreement_adjudicate", review_round, trace_id=traces[0].pk, code="1.3"),
        {"decision": "present", "note": "Step 1 shows it"},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and "Step 1 shows it" in r.content.decode()
    adj = Adjudication.objects.get(round=review_round, trace=traces[0], mode__code="1.3")
    assert (adj.decision, adj.basis) == ("present", "adjudicated")


def test_annotator_cannot_post_an_adjudication(review_round, annotator, traces):
    r = client_for(annotator).post(
        url("disagreement_adjudicate", review_round, trace_id=traces[0].pk, code="1.3"), {"decision": "present"}
    )
    assert r.status_code == 403


def test_comment_form_adds_to_the_thread(review_round, annotator, traces):
    r = client_for(annotator).post(
        url("disagreement_comment", review_round, trace_id=traces[0].pk, code="1.3"),
        {"body": "I saw <b>it</b> at step 1"},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert r.status_code == 200 and "I saw &lt;b&gt;it&lt;/b&gt; at step 1" in html


def test_disagreement_links_to_the_trace_at_the_evidence(review_round, manager, traces):
    html = client_for(manager).get(url("round_disagreements", review_round)).content.decode()
    assert reverse("trace_detail", kwargs={"slug": "demo", "pk": traces[0].pk}) + "#step-1" in html


def test_state_buttons_walk_the_round(project, manager, annotator, annotator2, traces):
    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    r = client_for(manager).post(url("round_action", rnd, action="close"))
    rnd.refresh_from_db()
    assert r.status_code == 302 and rnd.state == "closed"


def test_invalid_state_button_shows_the_reason(review_round, manager):
    c = client_for(manager)
    r = c.post(url("round_action", review_round, action="close"), follow=True)
    assert "not adjudicated yet" in r.content.decode()


def test_revise_page_drafts_the_next_version(review_round, manager):
    r = client_for(manager).post(
        url("round_revise", review_round, code="1.3"),
        {"name": "Step repetition", "definition": "Clearer words.", "note": "people disagreed"},
    )
    assert r.status_code == 302
    from taxonomy.models import FailureMode

    assert FailureMode.objects.filter(
        version__parent=review_round.taxonomy_version, code="1.3", definition="Clearer words."
    ).exists()


def test_revise_page_shows_the_definition_and_the_disputed_evidence_escaped(review_round, manager, traces):
    from django.utils.html import escape

    from taxonomy.models import FailureMode
    from traces.models import Step

    Step.objects.filter(trace=traces[0], index=1).update(content="Coder: <b>same code again</b>")
    mode = FailureMode.objects.get(version=review_round.taxonomy_version, code="1.3")
    r = client_for(manager).get(url("round_revise", review_round, code="1.3") + f"?trace={traces[0].pk}")
    html = r.content.decode()
    assert r.status_code == 200
    assert escape(mode.definition) in html and escape(mode.examples.splitlines()[0]) in html
    assert "1 disagreement on 1.3" in html and "ann1 saw it" in html  # the rater who said present, and why
    assert "Step 1</a> · Coder" in html and "&lt;b&gt;same code again&lt;/b&gt;" in html
    assert "<b>same code again</b>" not in html


def test_imported_labels_flow_into_the_report_page(project, manager, annotator, annotator2, traces):
    from annotations.labels.services import rater_for_user

    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    for u in (annotator, annotator2):
        round_labels_import(round=rnd, rater=rater_for_user(user=u), labels={t.pk: {"1.1": "present"} for t in traces})
    assert client_for(manager).get(url("round_report", rnd)).status_code == 200


def test_detail_page_links_the_refined_version(review_round, manager):
    from annotations.rounds.services import round_revise_definition

    mode = round_revise_definition(round=review_round, mode_code="1.3", definition="Sharper.", by=manager)
    html = client_for(manager).get(url("round_detail", review_round)).content.decode()
    assert mode.version.label in html and "what changed" in html


def test_report_of_a_round_without_submissions_says_undefined(project, manager, annotator, annotator2, traces):
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces, name="Empty")
    r = client_for(manager).get(url("round_report", rnd))
    assert r.status_code == 200 and "undefined" in r.content.decode()


# ---------------------------------------------------------------- the whole permission matrix

PAGES = ["round_detail", "round_report", "round_disagreements"]
EXPECTED = {
    # role: (open round: detail, report, disagreements), (review round: detail, report, disagreements)
    "manager": ((200, 200, 200), (200, 200, 200)),
    "annotator": ((200, 403, 403), (200, 200, 200)),
    "bystander": ((200, 403, 403), (200, 200, 200)),  # an annotator of the project, not of the round
    "viewer": ((200, 403, 403), (200, 200, 200)),
    "outsider": ((404, 404, 404), (404, 404, 404)),
}


@pytest.mark.parametrize("role", list(EXPECTED))
@pytest.mark.parametrize("state", ["open", "review"])
def test_permission_matrix(project, manager, annotator, annotator2, viewer, outsider, traces, role, state):
    from tests.factories import MembershipFactory, UserFactory

    bystander = UserFactory(username="bystander")
    MembershipFactory(project=project, user=bystander, role="annotator")
    if state == "open":
        rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces)
    else:
        rnd = make_review_round(
            project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
        )
    user = {"manager": manager, "annotator": annotator, "bystander": bystander, "viewer": viewer, "outsider": outsider}[
        role
    ]
    got = tuple(client_for(user).get(url(page, rnd)).status_code for page in PAGES)
    assert got == EXPECTED[role][0 if state == "open" else 1]


@pytest.mark.parametrize("n", [2, 6])
def test_disagreements_page_query_count_does_not_grow(
    project, manager, annotator, annotator2, django_assert_num_queries, n
):
    many = make_traces(project, n)
    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=many, disagree_on=many)
    c = client_for(manager)
    page = url("round_disagreements", rnd) + "?status=all"
    c.get(page)
    # the same count for 2 or 6 disagreeing traces: no query per disagreement (and none for the
    # published version's modes, cached by version_modes since the first request); +1: does anyone
    # attribute in this round (no: the attribution section costs nothing more)
    with django_assert_num_queries(16):  # +1: the traces withheld from her (blind again now)
        assert c.get(page).status_code == 200


def test_round_list_query_count_with_closed_rounds_does_not_grow(
    project, manager, annotator, annotator2, traces, django_assert_num_queries
):
    from annotations.rounds.services import round_close

    for i in range(3):
        rnd = make_review_round(
            project, manager=manager, annotators=[annotator, annotator2], traces=traces, name=f"C{i}"
        )
        round_close(round=rnd, by=manager)
    c = client_for(manager)
    list_url = reverse("annotations:round_list", kwargs={"slug": "demo"})
    c.get(list_url)
    # 6 + which rounds the user annotates + which are withheld (the blind rule) + the rounds' reports and
    # versions, whatever their number
    with django_assert_num_queries(10):
        html = c.get(list_url).content.decode()
    assert html.count('class="rd-xlabel"') == 3


def test_recording_a_decision_resends_the_counter_in_pinned_queries(
    client, project, manager, annotator, annotator2, django_assert_num_queries
):
    from tests.annotations.rounds_factories import make_review_round, make_traces

    traces = make_traces(project, 6)
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces
    )
    client.force_login(manager)
    url = f"/p/{project.slug}/rounds/{rnd.pk}/disagreements/{traces[0].pk}/1.3/adjudicate/"
    client.post(url, {"decision": "absent"}, HTTP_HX_REQUEST="true")  # warm the session and caches
    with django_assert_num_queries(24):  # +1: the traces withheld from her (blind again now)
        response = client.post(url, {"decision": "present", "note": "seen"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="rd-open-count"' in body and 'hx-swap-oob="true"' in body
    assert "<strong>5</strong> still to decide" in body


def test_create_form_opens_on_a_sample_size_its_preview_accepts(project, manager):
    """Twelve frameworks: a default of 10 would open the stratified preview on an error."""
    frameworks = [f"Framework{i}" for i in range(12)]
    make_traces(project, 24, frameworks=frameworks)
    client = client_for(manager)
    html = client.get(reverse("annotations:round_new", kwargs={"slug": "demo"})).content.decode()
    assert 'name="n" value="12"' in html
    r = client.post(
        reverse("annotations:round_preview", kwargs={"slug": "demo"}),
        {"method": "stratified", "n": 12, "seed": 1, "stratify_by": "framework"},
        HTTP_HX_REQUEST="true",
    )
    assert "<strong>12</strong> traces" in r.content.decode()


def test_create_form_default_size_is_at_most_the_projects_traces(project, manager):
    make_traces(project, 4)
    html = client_for(manager).get(reverse("annotations:round_new", kwargs={"slug": "demo"})).content.decode()
    assert 'name="n" value="4"' in html


def test_an_annotators_traces_come_a_page_at_a_time_with_her_counts(project, manager, annotator, annotator2):
    """A round of many traces lists the annotator's own a page at a time (it listed them all), with
    her submitted / draft / to-do counts over the whole round."""
    from tests.annotations.rounds_factories import label_via_workspace

    many = make_traces(project, 60)
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=many)
    label_via_workspace(round=rnd, user=annotator, trace=many[0], present={"1.3"})
    label_via_workspace(round=rnd, user=annotator, trace=many[55], present={"1.3"}, submit=False)
    label_via_workspace(round=rnd, user=annotator2, trace=many[1], present={"1.3"})  # hers: not counted
    c = client_for(annotator)
    html = c.get(url("round_detail", rnd)).content.decode()
    assert html.count("?round=") == 50 and "Page 1 of 2" in html
    assert "1 submitted, 1 draft, 58 to do, of 60." in html
    second = c.get(url("round_detail", rnd) + "?mine=2").content.decode()
    assert second.count("?round=") == 10 and f"#{many[55].pk}" in second and "badge-warn" in second
