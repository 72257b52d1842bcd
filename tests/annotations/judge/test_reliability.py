"""The judge's own reliability: the same scripted judge run twice (self-agreement), a new model
version against the earlier run (drift), the humans' kappa beside them, the page, API and downloads.

The "judge" is the real OpenAI-protocol server on 127.0.0.1 (tests/llm_server.py) answering per
trace from a script that the test changes between runs, so the runs differ on known traces and
modes; the expected kappas are computed by hand below.
"""

from __future__ import annotations

import csv
import io
import re
from fractions import Fraction

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotations.judge.comparison_stats import compare
from annotations.judge.reliability import (
    DRIFT,
    SELF,
    judge_reliability_pairs,
    judge_self_agreement,
    reliability_csv,
    reliability_latex,
)
from annotations.judge.reliability_stats import runs_agreement
from annotations.judge.runs import judge_run_create
from annotations.models import ModeLabel
from annotations.rounds.agreement import cohen_kappa
from annotations.rounds.services import agreement_report_get, round_close
from tests.annotations.conftest import drive, make_judge_traces
from tests.annotations.rounds_factories import make_review_round
from tests.llm_server import LLMServer, Reply, codes_of, good_answer

pytestmark = pytest.mark.django_db

TASK = re.compile(r"task (\d+) step")

# What the scripted judge says is present, per trace index (0..7), in each run.
FIRST = {0: {"1.1"}, 1: {"1.1"}, 2: {"1.1"}, 3: {"1.1"}, 5: {"2.3"}}
SECOND = {0: {"1.1"}, 1: {"1.1"}, 2: {"1.1"}, 4: {"1.1"}, 5: {"2.3"}, 6: {"2.3"}, 7: {"2.3"}}
# A new model version: says 3.3 everywhere, otherwise as the first run.
NEWER = {k: FIRST.get(k, set()) | {"3.3"} for k in range(8)}


class ScriptedJudge:
    """Answers each request by the trace it carries: ``present[k]`` for trace k."""

    def __init__(self):
        self.present: dict[int, set[str]] = {}
        self.server = LLMServer(default=self.answer)

    def answer(self, body):
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        k = int(TASK.findall(text)[-1])
        return Reply(good_answer(codes_of(body), present=self.present.get(k, set())))


@pytest.fixture
def judge():
    j = ScriptedJudge()
    j.server.start()
    yield j
    j.server.stop()


def run_judge(project, manager, judge, present, *, model="judge-1", use_cache=False):
    judge.present = present
    run = judge_run_create(
        project=project,
        by=manager,
        provider="openai",
        base_url=judge.server.url,
        model=model,
        use_cache=use_cache,
        start=False,
    )
    run = drive(run)
    assert run.state == "done" and run.n_done == 8
    return run


@pytest.fixture
def traces(project):
    return make_judge_traces(project, 8)


def row(result, code):
    return next(r for r in result["rows"] if r["mode"].code == code)


def hand_kappa(both_present, only_a, only_b, both_absent) -> Fraction:
    n = both_present + only_a + only_b + both_absent
    po = Fraction(both_present + both_absent, n)
    pa, pb = Fraction(both_present + only_a, n), Fraction(both_present + only_b, n)
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (po - pe) / (1 - pe)


def test_the_same_judge_run_twice_gives_its_self_agreement_per_mode(project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST, use_cache=True)
    second = run_judge(project, manager, judge, SECOND)
    assert judge.server.n_requests == 16  # the second run asked the model again: no cached answer
    result = judge_self_agreement(project=project, user=manager, run_a=second, run_b=first)
    assert result["kind"] == SELF and result["changes"] == []
    assert result["earlier"] == first and result["later"] == second
    assert result["n_traces"] == 8 and result["left_out"]["cached"] == 0

    # 1.1: both say present on traces 0-2, only the first on 3, only the second on 4, neither on 5-7:
    # po = 6/8, each run 4/8 present, pe = 1/2, kappa = (3/4 - 1/2) / (1/2) = 1/2.
    r11 = row(result, "1.1")
    assert (r11["both_present"], r11["only_a"], r11["only_b"], r11["both_absent"]) == (3, 1, 1, 3)
    assert r11["kappa"].value == pytest.approx(0.5)
    assert r11["kappa"].low is not None and r11["kappa"].low <= 0.5 <= r11["kappa"].high
    # 2.3: the first on 5, the second on 5, 6, 7: po = 6/8, pe = 1/8 * 3/8 + 7/8 * 5/8 = 38/64,
    # kappa = (48/64 - 38/64) / (26/64) = 5/13; the share present moves from 1/8 to 3/8.
    r23 = row(result, "2.3")
    assert r23["kappa"].value == pytest.approx(5 / 13)
    assert float(hand_kappa(1, 0, 2, 5)) == pytest.approx(5 / 13)
    assert (r23["prevalence_a"], r23["prevalence_b"]) == (pytest.approx(1 / 8), pytest.approx(3 / 8))
    assert r23["change"].value == pytest.approx(0.25)
    # 1.2: neither run ever says present: kappa is 0/0, said as such, not 0
    r12 = row(result, "1.2")
    assert r12["kappa"].value is None and "both constant" in r12["kappa"].undefined
    # pooled over 8 traces x 14 modes: 4 both present, 1 first only, 3 second only, 104 neither
    pooled = result["pooled"]
    assert (pooled["both_present"], pooled["only_a"], pooled["only_b"]) == (4, 1, 3)
    assert pooled["kappa"].value == pytest.approx(float(hand_kappa(4, 1, 3, 104)))
    assert pooled["kappa"].value == pytest.approx(59 / 91)
    # the project's agreement maths agrees
    a = np.array([1, 1, 1, 1, 0, 0, 0, 0], float)
    b = np.array([1, 1, 1, 0, 1, 0, 0, 0], float)
    assert cohen_kappa(a, b)["value"] == pytest.approx(r11["kappa"].value)
    assert not r11["reliable"]  # 8 traces: the interval is flagged, as on Compare judges

    # why the answers come from the items: the rater's annotations hold only the later run's labels
    assert first.rater_id == second.rater_id
    stored = set(
        ModeLabel.objects.filter(annotation__rater=second.rater, mode__code="1.1", decision="present").values_list(
            "annotation__trace__title", flat=True
        )
    )
    assert stored == {f"judge trace {k}" for k in (0, 1, 2, 4)}


def test_a_rerun_answered_from_the_cache_is_not_counted_as_agreement(project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST)
    again = run_judge(project, manager, judge, SECOND, use_cache=True)
    assert again.n_cached == 8 and judge.server.n_requests == 8
    result = judge_self_agreement(project=project, user=manager, run_a=first, run_b=again)
    assert result["n_traces"] == 0 and result["left_out"]["cached"] == 8
    assert "came from the cache" in result["problems"][0]
    assert row(result, "1.1")["kappa"].value is None


def test_a_new_model_version_shows_its_drift_and_flags_the_modes_that_moved(project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST)
    newer = run_judge(project, manager, judge, NEWER, model="judge-2")
    result = judge_self_agreement(project=project, user=manager, run_a=first, run_b=newer)
    assert result["kind"] == DRIFT and result["changes"] == ["model judge-1 → judge-2"]
    r33 = row(result, "3.3")
    assert (r33["prevalence_a"], r33["prevalence_b"]) == (0, 1)
    assert r33["change"].value == pytest.approx(1.0) and r33["moved"]
    assert r33["kappa"].value == 0  # always absent against always present: po = pe = 0
    r11 = row(result, "1.1")
    assert r11["kappa"].value == pytest.approx(1.0) and r11["change"].value == 0 and not r11["moved"]
    assert result["n_moved"] == 1
    # the pairs the page lists: the newer run against the first, a drift
    pairs = judge_reliability_pairs(project=project)
    assert [(p.earlier.pk, p.later.pk, p.kind) for p in pairs] == [(first.pk, newer.pk, DRIFT)]


def test_pairs_find_the_same_judge_across_another_model_in_between(project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST)
    newer = run_judge(project, manager, judge, NEWER, model="judge-2")
    third = run_judge(project, manager, judge, SECOND)
    pairs = {(p.earlier.pk, p.later.pk): p.kind for p in judge_reliability_pairs(project=project)}
    assert pairs == {(first.pk, newer.pk): DRIFT, (newer.pk, third.pk): DRIFT, (first.pk, third.pk): SELF}


def test_runs_on_other_prompts_or_versions_are_refused_with_the_reason(project, manager, traces, judge):
    from annotations.judge.prompts import prompt_template_active, prompt_template_save

    first = run_judge(project, manager, judge, FIRST)
    active = prompt_template_active(taxonomy_version=project.taxonomy_version)
    prompt_template_save(taxonomy_version=project.taxonomy_version, text=active.text + "\nBe brief.", by=manager)
    other = run_judge(project, manager, judge, FIRST)
    with pytest.raises(ValidationError, match="a changed prompt is another judge"):
        judge_self_agreement(project=project, user=manager, run_a=first, run_b=other)
    assert judge_reliability_pairs(project=project) == []


def test_the_pure_prevalence_interval_uses_the_kappa_resamples():
    a = np.array([[1, 0], [1, 0], [0, 0], [0, 1]], float)
    b = np.array([[1, 1], [0, 1], [0, 1], [0, 1]], float)
    out = runs_agreement(a, b, n_boot=200, seed=5)
    ref = compare(a, b, n_boot=200, seed=5)
    assert out["modes"][0]["kappa"] == ref["modes"][0]["kappa"]
    assert out["modes"][1]["change"].value == pytest.approx(0.75)
    assert out["modes"][0]["change"].value == pytest.approx(-0.25)


def test_pure_kappa_matches_the_rounds_cohen_kappa_on_random_labels():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, size=(40, 5)).astype(float)
    b = np.where(rng.random((40, 5)) < 0.2, 1 - a, a)
    b[rng.random((40, 5)) < 0.1] = np.nan  # missing labels: the pair is dropped
    out = runs_agreement(a, b, n_boot=50)
    for j in range(5):
        assert out["modes"][j]["kappa"].value == pytest.approx(cohen_kappa(a[:, j], b[:, j])["value"])
        known = ~np.isnan(b[:, j])
        share = b[known, j].mean() - a[known, j].mean()
        assert out["modes"][j]["change"].value == pytest.approx(share)


@pytest.mark.django_db(transaction=True)
def test_prelabel_no_cache_asks_the_model_again(project, manager, traces, judge):
    from django.core.management import call_command

    run_judge(project, manager, judge, FIRST)
    call_command(
        "prelabel",
        "--project",
        project.slug,
        "--provider",
        "openai",
        "--base-url",
        judge.server.url,
        "--model",
        "judge-1",
        "--no-cache",
        "--inline",
    )
    assert judge.server.n_requests == 16


# ---------------------------------------------------------------- the humans' row, page, API, downloads


def closed_human_round(project, manager, traces):
    from tests.factories import MembershipFactory, UserFactory

    people = []
    for name in ("h1", "h2", "h3"):
        user = UserFactory(username=name)
        MembershipFactory(project=project, user=user, role="annotator")
        people.append(user)
    rnd = make_review_round(project, manager=manager, annotators=people, traces=traces[:4], disagree_on=traces[:2])
    rnd = round_close(round=rnd, by=manager, with_majority=True)
    return rnd, agreement_report_get(round=rnd)


def test_traces_of_an_open_round_the_manager_labels_are_left_out_and_an_open_round_gives_no_human_row(
    project, manager, annotator, traces, judge
):
    from tests.annotations.rounds_factories import make_open_round

    rnd, _ = closed_human_round(project, manager, traces)
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)
    # a newer round, open, labelled blind by the manager herself on traces 3 and 4 (where the runs differ)
    make_open_round(project, manager=manager, annotators=[manager, annotator], traces=traces[3:5], name="Blind")
    result = judge_self_agreement(project=project, user=manager, run_a=first, run_b=second)
    assert result["left_out"]["hidden"] == 2 and result["n_traces"] == 6
    r11 = row(result, "1.1")  # traces 0-2 present in both, 5-7 absent in both: perfect on what she may see
    assert (r11["both_present"], r11["only_a"], r11["only_b"]) == (3, 0, 0) and r11["kappa"].value == 1.0
    assert result["humans"]["round"] == rnd  # the closed round, not the open one


def test_the_humans_kappa_stands_beside_the_judges(project, manager, traces, judge):
    rnd, report = closed_human_round(project, manager, traces)
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)
    result = judge_self_agreement(project=project, user=manager, run_a=first, run_b=second)
    assert result["humans"]["round"] == rnd
    stored = {m["mode"]: m["mean_pairwise_kappa"] for m in report.data["per_mode"]}
    r13 = row(result, "1.3")
    assert r13["human"].value == pytest.approx(stored["1.3"]["value"])
    r11 = row(result, "1.1")  # all three humans said 1.1 everywhere: undefined, with the reason
    assert r11["human"].value is None and r11["human"].undefined == stored["1.1"]["undefined"]


def test_without_a_closed_round_the_page_says_why_there_is_no_human_row(client, project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)
    client.force_login(manager)
    url = reverse("annotations:judge_reliability", kwargs={"slug": project.slug})
    page = client.get(url, {"a": first.pk, "b": second.pk}).content.decode()
    assert "no closed round on" in page
    assert "Self-agreement" in page and "0.50" in page


def test_page_downloads_and_api_give_the_same_numbers(client, project, manager, traces, judge):
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)
    client.force_login(manager)
    url = reverse("annotations:judge_reliability", kwargs={"slug": project.slug})
    got = client.get(url, {"a": first.pk, "b": second.pk, "format": "csv"})
    assert got["Content-Disposition"].endswith('.csv"')
    rows = {r["mode"]: r for r in csv.DictReader(io.StringIO(got.content.decode()))}
    assert rows["1.1"]["kappa"] == "0.50" and rows["2.3"]["kappa"] == f"{5 / 13:.2f}"
    assert rows["1.2"]["kappa"] == "" and "both constant" in rows["1.2"]["kappa_undefined"]
    tex = client.get(url, {"a": first.pk, "b": second.pk, "format": "tex"}).content.decode()
    assert r"\begin{tabular}" in tex and "0.50 [" in tex and "Self-agreement" in tex
    api = client.get(f"/api/projects/{project.slug}/judge-runs/{second.pk}/reliability/", {"against": first.pk})
    assert api.status_code == 200
    data = api.json()
    modes = {m["code"]: m for m in data["modes"]}
    assert data["kind"] == "self" and data["n_traces"] == 8
    assert modes["1.1"]["kappa"]["value"] == pytest.approx(0.5)
    assert modes["1.2"]["kappa"]["value"] is None and modes["1.2"]["kappa"]["undefined"]
    assert data["humans"]["why_not"].startswith("no closed round")
    # no ?against: the run it follows
    assert client.get(f"/api/projects/{project.slug}/judge-runs/{second.pk}/reliability/").json()["earlier"]["id"] == (
        first.pk
    )
    assert reliability_csv and reliability_latex  # the page's downloads are these writers


def test_api_query_count_is_pinned(client, project, manager, traces, judge, django_assert_num_queries):
    closed_human_round(project, manager, traces)
    first = run_judge(project, manager, judge, FIRST)
    second = run_judge(project, manager, judge, SECOND)
    client.force_login(manager)
    url = f"/api/projects/{project.slug}/judge-runs/{second.pk}/reliability/?against={first.pk}"
    client.get(url)
    with django_assert_num_queries(9):
        assert client.get(url).status_code == 200


def test_api_refuses_non_managers_and_says_why_a_pair_cannot_be_compared(
    client, project, manager, annotator, traces, judge
):
    first = run_judge(project, manager, judge, FIRST)
    client.force_login(annotator)
    assert client.get(f"/api/projects/{project.slug}/judge-runs/{first.pk}/reliability/").status_code == 403
    client.force_login(manager)
    got = client.get(f"/api/projects/{project.slug}/judge-runs/{first.pk}/reliability/")
    assert got.status_code == 400 and "no other finished run" in str(got.json())
