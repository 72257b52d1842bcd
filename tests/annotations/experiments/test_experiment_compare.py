"""Two cohorts of a project's agreed labels compared (annotations/experiments/selectors.py) and its
API: the figures are the statistics' on the cohorts' counts, cohorts are read from their text with
a clear error, overlapping traces are left out and counted, the same task pairs (issue 31)."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.exceptions import ValidationError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.experiments import stats
from annotations.experiments.selectors import experiment_compare
from tests.annotations.releases_factories import closed_round, make_trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def cohorts(project, mast_version):
    """ChatDev: 10 traces, FM-1.3 in 8; MetaGPT: 12 traces, FM-1.3 in 2, FM-2.1 in 6. The first
    four tasks ran in both frameworks."""
    labelled = {}
    for k in range(10):
        outcome = "failure" if k < 7 else "success"
        task = f"task {k}" if k < 4 else ""
        t = make_trace(project, mas_name="ChatDev", task=task, outcome=outcome, metadata={"variant": "v1"})
        labelled[t] = {"1.3"} if k < 8 else set()
    for k in range(12):
        outcome = "failure" if k < 3 else "success"
        task = f"task {k}" if k < 4 else ""
        t = make_trace(project, mas_name="MetaGPT", task=task, outcome=outcome, metadata={"variant": "v2"})
        labelled[t] = ({"1.3"} if k < 2 else set()) | ({"2.1"} if k < 6 else set())
    closed_round(project, mast_version, labelled)
    return labelled


def _row(rows, code):
    return next(r for r in rows if r["code"] == code)


def test_each_mode_is_the_statistics_of_the_two_cohorts_counts(cohorts, project, manager):
    exp = experiment_compare(user=manager, project=project, a="mas_name:ChatDev", b="mas_name:MetaGPT")
    assert (exp.n_a, exp.n_b, exp.n_both) == (10, 12, 0)
    fm13 = _row(exp.modes, "1.3")
    assert (fm13["a"]["k"], fm13["a"]["n"], fm13["b"]["k"], fm13["b"]["n"]) == (8, 10, 2, 12)
    expected = stats.cohort_difference(8, 10, 2, 12)
    assert fm13["difference"] == expected.as_dict()
    # a fall from 80% is a rise from 20% on the arcsine scale, the smaller of the two
    assert fm13["min_detectable"] == pytest.approx(stats.minimum_detectable_difference(0.2, 10, 12))
    assert stats.minimum_detectable_difference(0.8, 10, 12) is None  # no rise from 80% is findable here
    # Holm over the modes that have a test: FM-1.3 and FM-2.1; the 12 modes nobody saw have none
    tested = [r for r in exp.modes if r["difference"]["p_value"] is not None]
    assert sorted(r["code"] for r in tested) == ["1.3", "2.1"]
    p13, p21 = fm13["difference"]["p_value"], _row(exp.modes, "2.1")["difference"]["p_value"]
    lo, hi = sorted([p13, p21])
    adjusted = sorted([fm13["p_adjusted"], _row(exp.modes, "2.1")["p_adjusted"]])
    assert adjusted == pytest.approx([2 * lo, max(2 * lo, hi)])
    never = _row(exp.modes, "3.3")
    assert never["p_adjusted"] is None and "nothing to test" in never["difference"]["undefined"]
    # task success: ChatDev 3 of 10 succeeded, MetaGPT 9 of 12
    assert (exp.success["a"]["k"], exp.success["b"]["k"]) == (3, 9)
    # categories: FC1 (specification) holds FM-1.3
    fc1 = _row(exp.categories, "1")
    assert (fc1["a"]["k"], fc1["b"]["k"]) == (8, 2)


def test_the_same_tasks_in_both_cohorts_are_paired(cohorts, project, manager):
    exp = experiment_compare(user=manager, project=project, a="mas_name:ChatDev", b="mas_name:MetaGPT")
    assert exp.n_paired == 4
    paired = _row(exp.modes, "1.3")["paired"]
    # tasks 0-3: ChatDev has FM-1.3 on all four, MetaGPT on tasks 0 and 1
    assert (paired["n"], paired["a_only"], paired["b_only"]) == (4, 2, 0)
    assert paired["p_value"] == pytest.approx(stats.mcnemar_exact(2, 0))


def test_metadata_cohorts_and_overlaps(cohorts, project, manager):
    exp = experiment_compare(user=manager, project=project, a="meta.variant:v1", b="meta.variant:v2;mas_name:MetaGPT")
    assert (exp.n_a, exp.n_b) == (10, 12)
    overlap = experiment_compare(user=manager, project=project, a="benchmark:ProgramDev", b="mas_name:MetaGPT")
    assert (overlap.n_a, overlap.n_b, overlap.n_both) == (10, 0, 12)  # MetaGPT's are in both: left out
    assert _row(overlap.modes, "1.3")["difference"]["undefined"] == "cohort B has no trace with this mode labelled"


@pytest.mark.parametrize(
    ("a", "says"),
    [
        ("", "choose the traces"),
        ("framework=ChatDev", "write field:value"),
        ("team:red", "unknown field"),
        ("meta.a b:1", "a metadata key is"),
        ("imported:2026-13-01..", "not a date"),
        ("imported:2026-01-01", "imported:FIRST..BEFORE"),
    ],
)
def test_a_cohort_it_cannot_read_is_refused_saying_which_part(project, manager, a, says):
    with pytest.raises(ValidationError, match=says):
        experiment_compare(user=manager, project=project, a=a, b="mas_name:MetaGPT")


def test_the_api_answers_json_and_csv_and_refuses_a_bad_cohort(cohorts, project, manager, outsider):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=manager).key}")
    url = f"/api/projects/{project.slug}/experiments/compare/"
    data = client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT"}).json()
    assert (data["n_a"], data["n_b"], data["n_paired_tasks"]) == (10, 12, 4)
    assert _row(data["modes"], "1.3")["b"]["k"] == 2

    response = client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT", "download": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    fm13 = next(r for r in rows if r["level"] == "mode" and r["code"] == "1.3")
    assert (fm13["a_present"], fm13["a_known"], fm13["b_present"], fm13["b_known"]) == ("8", "10", "2", "12")
    assert {r["level"] for r in rows} == {"mode", "category", "task success"}

    latex = client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT", "download": "tex"})
    assert latex["Content-Type"].startswith("application/x-tex")
    body = latex.content.decode()
    assert "\\toprule" in body and "8/10 (80.0) & 2/12 (16.7)" in body and "mas\\_name:ChatDev" in body

    bad = client.get(url, {"a": "team:red", "b": "mas_name:MetaGPT"})
    assert bad.status_code == 400 and "unknown field" in bad.json()["a"][0]

    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=outsider).key}")
    assert client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT"}).status_code in (403, 404)
