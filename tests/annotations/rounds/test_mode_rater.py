"""The report's mode x rater view: per-rater prevalence and kappa against the others, per mode."""

from __future__ import annotations

import pytest

from annotations.rounds.mode_rater import mode_rater_view


def _pair(a, b, v):
    return {"a": a, "b": b, "kappa": {"value": v}}


def test_rater_kappa_is_the_mean_of_her_defined_pairs():
    data = {
        "raters": ["a", "b", "c"],
        "per_mode": [{"mode": "1.1", "pairwise": [_pair("a", "b", 0.5), _pair("a", "c", None), _pair("b", "c", 0.9)]}],
    }
    view = mode_rater_view(data, prevalence={("a", "1.1"): 0.25}, names={"1.1": "Disobey"})
    a, b, c = view["rows"][0]["cells"]
    assert a["kappa"] == 0.5 and a["n_pairs"] == 1
    assert b["kappa"] == pytest.approx(0.7) and b["n_pairs"] == 2
    assert c["kappa"] == 0.9
    assert a["prevalence_text"] == "25%" and b["prevalence_text"] == "0%"


def test_rater_with_no_defined_pair_is_undefined():
    data = {"raters": ["a", "b"], "per_mode": [{"mode": "1.1", "pairwise": [_pair("a", "b", None)]}]}
    cell = mode_rater_view(data, prevalence={}, names={})["rows"][0]["cells"][0]
    assert cell["kappa"] is None and cell["n_pairs"] == 0


def test_report_page_shows_each_raters_prevalence(client, project, manager, annotator, annotator2):
    from tests.annotations.rounds_factories import make_review_round, make_traces

    traces = make_traces(project, 4)
    rnd = make_review_round(
        project, manager=manager, annotators=[annotator, annotator2], traces=traces, disagree_on=traces[:1]
    )
    client.force_login(manager)
    resp = client.get(f"/p/{project.slug}/rounds/{rnd.pk}/report/")
    rows = {r["code"]: r for r in resp.context["mode_rater"]["rows"]}
    by_rater = {c["rater"]: c for c in rows["1.3"]["cells"]}
    assert by_rater[annotator.username]["prevalence"] == pytest.approx(1 / 4)  # 1.3 on one trace of four
    assert by_rater[annotator2.username]["prevalence"] == 0.0
    assert {c["rater"]: c["prevalence"] for c in rows["1.1"]["cells"]} == {
        annotator.username: 1.0,
        annotator2.username: 1.0,
    }
