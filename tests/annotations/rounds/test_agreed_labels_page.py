"""The agreed-labels page: a project's agreed labels on a target version, with mapping counts."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.rounds.services import round_close
from taxonomy.services import mode_split, version_draft_from, version_publish
from tests.annotations.rounds_factories import make_open_round, make_review_round, make_traces

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_user(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.fixture
def closed(project, manager, annotator, annotator2):
    """Round 1 on MAST v1, closed: 5 traces, everyone said 1.1 present and the rest absent."""
    traces = make_traces(project, 5)
    rnd = make_review_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces, name="Round 1")
    return round_close(round=rnd, by=manager), traces


@pytest.fixture
def split_v2(mast_version, manager):
    """MAST v2 with 1.1 split into 1.1 and 1.7, published."""
    draft = version_draft_from(source=mast_version, by=manager)
    mode = draft.modes.get(code="1.1")
    mode_split(
        mode=mode,
        into=[
            {"code": "1.1", "name": "Disobey task spec", "definition": "Ignores the task."},
            {"code": "1.7", "name": "Disobey format", "definition": "Ignores the output format."},
        ],
    )
    return version_publish(version=draft)


def url(project, **params):
    from urllib.parse import urlencode

    return reverse("annotations:agreed_labels", kwargs={"slug": project.slug}) + (
        f"?{urlencode(params)}" if params else ""
    )


def test_page_lists_agreed_labels_on_the_working_version(as_user, closed, project, viewer):
    r = as_user(viewer).get(url(project))
    assert r.status_code == 200
    assert r.context["target"] == project.taxonomy_version
    assert (r.context["n_traces"], r.context["n_labels"], r.context["agreed"].n_unknown) == (5, 70, 0)
    totals = dict(zip([m.code for m in r.context["modes"]], r.context["totals"], strict=True))
    assert totals["1.1"] == 5 and totals["1.2"] == 0
    assert r.content.decode().count('class="num ag-cell ag-present') == 5


def test_on_a_version_that_split_a_mode_the_present_values_are_unknown_and_counted(
    as_user, closed, project, viewer, split_v2
):
    r = as_user(viewer).get(url(project, version=split_v2.pk))
    assert r.context["target"] == split_v2
    assert r.context["agreed"].n_unknown == 10  # 1.1 and 1.7 on each of the 5 traces
    (row,) = [m for m in r.context["agreed"].mapping if m["version"] == "MAST v1"]
    assert (row["labels"], row["unknown"], row["mapped"]) == (70, 5, 65)
    body = r.content.decode()
    assert 'data-testid="ag-unknown">10<' in body and "Unknown on MAST v2" in body


def test_traces_in_a_blind_round_are_left_out_for_its_annotator(
    as_user, closed, project, manager, annotator, annotator2
):
    _rnd, traces = closed
    make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=traces[:1], name="Round 2")
    mine = as_user(annotator).get(url(project))
    assert mine.context["n_traces"] == 4 and mine.context["n_withheld"] == 1
    assert traces[0].display_name not in mine.content.decode()
    assert as_user(manager).get(url(project)).context["n_traces"] == 5  # not an annotator of Round 2


def test_one_round_can_be_picked(as_user, closed, project, viewer):
    rnd, _traces = closed
    r = as_user(viewer).get(url(project, round=rnd.pk))
    assert r.context["round"] == rnd and r.context["n_traces"] == 5


def test_the_page_pins_its_queries(as_user, closed, project, viewer, django_assert_max_num_queries):
    c = as_user(viewer)
    c.get(url(project))
    with django_assert_max_num_queries(20):
        assert c.get(url(project)).status_code == 200


def test_outsiders_get_404(as_user, closed, project, outsider):
    assert as_user(outsider).get(url(project)).status_code == 404
