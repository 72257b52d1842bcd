"""An experiment on a judge corrected by the agreed human labels (annotations/experiments/corrected.py),
and the taxonomy's "what to try" notes on its rows (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.experiments import stats
from annotations.experiments.selectors import experiment_compare, experiment_sources
from annotations.judge.prevalence import ppi_mean
from taxonomy import mast_v1
from tests.annotations.releases_factories import annotate, closed_round, decisions, human_rater, make_trace, other_rater

pytestmark = pytest.mark.django_db

# per cohort: the judge's FM-1.3 on 20 traces; the agreed labels on the first 8 of them
JUDGE = {"ChatDev": [1] * 14 + [0] * 6, "MetaGPT": [1] * 5 + [0] * 15}
HUMAN = {"ChatDev": [1, 1, 0, 1, 1, 1, 0, 1], "MetaGPT": [1, 0, 0, 1, 0, 0, 1, 0]}


@pytest.fixture
def judged(project, mast_version):
    judge = other_rater("judge-corrected")
    agreed = {}
    for mas, calls in JUDGE.items():
        for i, f in enumerate(calls):
            trace = make_trace(project, mas_name=mas)
            annotate(trace, judge, mast_version, decisions(mast_version, present={"1.3"} if f else ()))
            if i < len(HUMAN[mas]):
                agreed[trace] = {"1.3"} if HUMAN[mas][i] else set()
    closed_round(project, mast_version, agreed)
    return judge


def _parts(mas: str) -> tuple:
    y = np.array(HUMAN[mas], dtype=float)
    f = np.array(JUDGE[mas], dtype=float)
    return y, f[: len(y)], f[len(y) :]


def test_each_cohort_is_the_judge_corrected_by_its_human_sample(judged, project, manager):
    exp = experiment_compare(
        user=manager, project=project, a="mas_name:ChatDev", b="mas_name:MetaGPT", source=f"corrected:{judged.pk}"
    )
    assert exp.corrected and "random sample" in exp.caveat and "corrected by the agreed labels" in exp.source
    fm13 = next(r for r in exp.modes if r["code"] == "1.3")
    a, b = _parts("ChatDev"), _parts("MetaGPT")
    assert fm13["a"]["value"] == pytest.approx(ppi_mean(*a).value)
    assert fm13["a"]["low"] == pytest.approx(ppi_mean(*a).low)
    assert (fm13["a"]["n"], fm13["a"]["n_human"], fm13["a"]["k"]) == (20, 8, None)
    assert fm13["difference"] == pytest.approx(stats.ppi_difference(a, b).as_dict())
    # the judge alone says 70% -> 25%; the humans disagree on some of each: the corrected shares differ
    assert fm13["a"]["value"] != pytest.approx(0.7)
    # a mode the judge and the humans never saw: no variation, no test, said so
    never = next(r for r in exp.modes if r["code"] == "3.3")
    assert never["difference"]["p_value"] is None and never["difference"]["undefined"]
    assert exp.n_paired == 0


def test_the_corrected_source_is_offered_for_judges_only_and_the_api_answers_it(judged, project, manager, annotator):
    values = [v for v, _ in experiment_sources(user=manager, project=project)]
    assert f"corrected:{judged.pk}" in values
    human = human_rater(annotator)
    assert f"corrected:{human.pk}" not in values
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=manager).key}")
    url = f"/api/projects/{project.slug}/experiments/compare/"
    data = client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT", "rater": f"corrected:{judged.pk}"})
    assert data.status_code == 200 and data.json()["corrected"] is True and data.json()["caveat"]
    refused = client.get(url, {"a": "mas_name:ChatDev", "b": "mas_name:MetaGPT", "rater": f"corrected:{human.pk}"})
    assert refused.status_code == 400


def test_rows_carry_the_versions_what_to_try_note(judged, project, manager):
    exp = experiment_compare(user=manager, project=project, a="mas_name:ChatDev", b="mas_name:MetaGPT")
    fm13 = next(r for r in exp.modes if r["code"] == "1.3")
    fm31 = next(r for r in exp.modes if r["code"] == "3.1")
    assert fm13["what_to_try"] == mast_v1.WHAT_TO_TRY["1"]  # no note of its own: its category's
    assert fm31["what_to_try"] == mast_v1.WHAT_TO_TRY["3"]
    assert next(r for r in exp.categories if r["code"] == "2")["what_to_try"] == mast_v1.WHAT_TO_TRY["2"]
