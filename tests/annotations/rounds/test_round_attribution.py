"""Attribution in rounds: saved with the annotation, agreement equal to the libraries, consensus and adjudication."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotations.labels.services import AnnotationInvalid, annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import AttributionDecision
from annotations.rounds.attribution.consensus import (
    agreed_attributions,
    attribution_adjudicate,
    round_attribution_disagreements,
)
from annotations.rounds.services import agreement_report_get, round_close, round_create, round_open, round_start_review
from tests.annotations.rounds_factories import codes
from tests.annotations.workspace_factories import make_trace
from tests.factories import MembershipFactory, UserFactory

AGENTS = ("Planner", "Coder", "Tester")
# Three annotators, six traces; (decisive step, agent) or None for "no single decisive step".
ANSWERS = {
    "ann": [(3, "Coder"), (1, "Coder"), (7, "Tester"), (10, "Coder"), (4, "Coder"), None],
    "bob": [(3, "Coder"), (2, "Tester"), (9, "Tester"), (10, "Coder"), (1, "Coder"), None],
    "cat": [(3, "Coder"), (1, "Coder"), (7, "Coder"), (14, "Tester"), (4, "Planner"), (5, "Tester")],
}


def _people(project, names):
    out = []
    for name in names:
        user = UserFactory(username=name)
        MembershipFactory(project=project, user=user, role="annotator")
        out.append(user)
    return out


def _label(rnd, user, trace, answer, *, submit=True):
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=rnd.taxonomy_version, round=rnd)
    labels = [{"code": c, "decision": "present" if c == "1.1" else "absent"} for c in codes(rnd.taxonomy_version)]
    if answer is None:
        attribution = {"no_single_step": True, "reason": f"{user.username}: it built up"}
    else:
        attribution = {"step": answer[0], "agent": answer[1], "modes": ["1.1"], "reason": f"{user.username} says so"}
    ann = annotation_save(annotation=ann, by=user, base_revision=ann.revision, labels=labels, attribution=attribution)
    if submit:
        annotation_submit(annotation=ann, by=user, base_revision=ann.revision)


@pytest.fixture
def review_round(project, manager):
    people = _people(project, ANSWERS)
    traces = [make_trace(project, n_steps=16, agents=AGENTS, title=f"t{i}") for i in range(6)]
    rnd = round_create(
        project=project,
        name="Attribution round",
        taxonomy_version=project.taxonomy_version,
        annotators=people,
        method="manual",
        trace_ids=[t.pk for t in traces],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    for user in people:
        for trace, answer in zip(traces, ANSWERS[user.username], strict=True):
            _label(rnd, user, trace, answer)
    round_start_review(round=rnd, by=manager)
    return rnd, traces, people


def test_round_report_attribution_figures_equal_scikit_learn_and_statsmodels(review_round):
    rnd, traces, _ = review_round
    section = agreement_report_get(round=rnd).data["attribution"]
    # Agents over the traces everyone attributed to an agent (the last trace: two said "no single step").
    agents = {name: [a[1] if a else None for a in rows] for name, rows in ANSWERS.items()}
    names = sorted(agents)
    pair_kappas = []
    for pair, (a, b) in zip(section["agent"]["pairs"], combinations(names, 2), strict=True):
        both = [k for k in range(6) if agents[a][k] and agents[b][k]]
        expected = cohen_kappa_score([agents[a][k] for k in both], [agents[b][k] for k in both])
        assert (pair["a"], pair["b"]) == (a, b)
        assert pair["kappa"]["value"] == pytest.approx(expected, abs=1e-12)
        assert pair["n"] == len(both)
        pair_kappas.append(expected)
    assert section["agent"]["mean_pairwise_kappa"]["value"] == pytest.approx(np.mean(pair_kappas), abs=1e-12)
    complete = [k for k in range(6) if all(agents[n][k] for n in names)]
    table, _ = aggregate_raters(np.array([[agents[n][k] for n in names] for k in complete]))
    assert section["agent"]["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
    assert section["agent"]["fleiss_kappa"]["n_units"] == len(complete) == 5
    # Steps, by hand over 3 pairs x 6 traces: exact on t0 (3 pairs), t1 ann/cat, t2 ann/cat, t3 ann/bob,
    # t4 ann/cat, t5 ann/bob (both "no single step") = 8; within 1 adds t1 ann/bob and bob/cat = 10;
    # within 3 adds t2 ann/bob and bob/cat, t4 ann/bob and bob/cat = 14.
    assert section["step"]["n_units"] == 18
    assert section["step"]["exact"]["value"] == pytest.approx(8 / 18)
    assert section["step"]["within_1"]["value"] == pytest.approx(10 / 18)
    assert section["step"]["within_3"]["value"] == pytest.approx(14 / 18)
    # |steps| where both named one: t0 0,0,0; t1 1,0,1; t2 2,0,2; t3 0,4,4; t4 3,0,3 (t5: only none vs 5).
    assert section["step"]["mean_abs_distance"]["value"] == pytest.approx(20 / 15)
    lo, hi = section["agent"]["mean_pairwise_kappa"]["ci"]
    assert lo <= section["agent"]["mean_pairwise_kappa"]["value"] <= hi
    assert section["n_disagreements"] == 5


def test_unanimous_attribution_becomes_consensus_and_the_rest_waits_for_adjudication(review_round, manager):
    rnd, traces, _ = review_round
    decision = AttributionDecision.objects.get(round=rnd, trace=traces[0])
    assert (decision.decisive_step, decision.agent, decision.basis) == (3, "Coder", "unanimous")
    assert decision.modes == ["1.1"]
    with pytest.raises(ValidationError, match="5 attribution disagreement"):
        round_close(round=rnd, by=manager)


def test_adjudicated_attribution_is_the_agreed_attribution(review_round, manager):
    rnd, traces, _ = review_round
    for t in traces[1:]:
        attribution_adjudicate(
            round=rnd, trace=t, step=2, modes=["1.1"], reason="agreed", note="after talk", by=manager
        )
    decision = AttributionDecision.objects.get(round=rnd, trace=traces[1])
    assert decision.agent == "Tester"  # taken from step 2 (Planner, Coder, Tester, ...)
    round_close(round=rnd, by=manager)
    agreed = agreed_attributions(project=rnd.project)
    assert agreed[traces[1].pk].decisive_step == 2
    assert agreed[traces[0].pk].basis == "unanimous"


def test_adjudicating_a_step_the_trace_does_not_have_is_refused(review_round, manager):
    rnd, traces, _ = review_round
    with pytest.raises(ValidationError, match="Step 99 does not exist"):
        attribution_adjudicate(round=rnd, trace=traces[1], step=99, by=manager)
    with pytest.raises(ValidationError, match="one of the two"):
        attribution_adjudicate(round=rnd, trace=traces[1], step=1, no_single_step=True, by=manager)


def test_close_with_majority_decides_strict_majorities_and_refuses_ties(review_round, manager):
    rnd, traces, _ = review_round
    with pytest.raises(ValidationError, match="no strict majority"):
        round_close(round=rnd, by=manager, with_majority=True)
    for t in traces[2:]:  # three different answers on these: a tie each
        attribution_adjudicate(round=rnd, trace=t, step=5, by=manager)
    round_close(round=rnd, by=manager, with_majority=True)
    d = AttributionDecision.objects.get(round=rnd, trace=traces[1])
    assert (d.decisive_step, d.agent, d.basis) == (1, "Coder", "majority")


def test_disagreements_list_each_raters_attribution(review_round, manager):
    rnd, traces, _ = review_round
    items = round_attribution_disagreements(round=rnd, user=manager, status="open")
    assert [d.trace.pk for d in items] == [t.pk for t in traces[1:]]
    assert [r.text for r in items[-1].raters] == [
        "no single decisive step",
        "no single decisive step",
        "step 5 · Tester",
    ]


def test_agent_is_taken_from_the_decisive_step_and_a_missing_step_is_refused(project, annotator):
    trace = make_trace(project, n_steps=4, agents=AGENTS)
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    ann = annotation_save(annotation=ann, by=annotator, base_revision=0, labels=[], attribution={"step": 2})
    assert ann.snapshot["attribution"]["agent"] == "Tester"
    with pytest.raises(AnnotationInvalid) as exc:
        annotation_save(annotation=ann, by=annotator, base_revision=ann.revision, labels=[], attribution={"step": 9})
    assert exc.value.errors[0]["field"] == "attribution.step"
    assert "step 9 does not exist" in exc.value.errors[0]["message"]


def _span_trace(project):
    """agent invocation (Planner) -> tool call (no agent) -> tool output (no agent); a lone tool output."""
    from traces.models import Step

    trace = make_trace(project, n_steps=4, agents=AGENTS)
    Step.objects.filter(trace=trace, index__in=[1, 2, 3]).update(agent="")
    Step.objects.filter(trace=trace, index=1).update(kind="tool_call", parent_index=0)
    Step.objects.filter(trace=trace, index=2).update(kind="tool_output", parent_index=1)
    Step.objects.filter(trace=trace, index=3).update(kind="tool_output", parent_index=None)
    return trace


def test_a_tool_output_without_agent_takes_the_agent_that_called_the_tool(project, annotator):
    trace = _span_trace(project)
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    ann = annotation_save(annotation=ann, by=annotator, base_revision=0, labels=[], attribution={"step": 2})
    assert ann.snapshot["attribution"]["agent"] == "Planner"
    assert ann.attribution.agent == "Planner"


def test_a_tool_output_with_no_agent_up_its_tree_is_refused_until_an_agent_is_named(project, annotator):
    trace = _span_trace(project)
    ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
    with pytest.raises(AnnotationInvalid) as exc:
        annotation_save(annotation=ann, by=annotator, base_revision=0, labels=[], attribution={"step": 3})
    assert exc.value.errors[0]["field"] == "attribution.agent"
    assert "step 3 names no agent" in exc.value.errors[0]["message"]
    ann = annotation_save(
        annotation=ann, by=annotator, base_revision=0, labels=[], attribution={"step": 3, "agent": "Coder"}
    )
    assert ann.snapshot["attribution"]["agent"] == "Coder"


@pytest.mark.parametrize("n", [2, 5])
def test_disagreements_page_with_attribution_cards_has_a_fixed_query_count(
    project, manager, django_assert_num_queries, n
):
    from django.test import Client
    from django.urls import reverse

    people = _people(project, ["ann", "bob"])
    traces = [make_trace(project, n_steps=6, agents=AGENTS, title=f"q{i}") for i in range(n)]
    rnd = round_create(
        project=project,
        name="Q",
        taxonomy_version=project.taxonomy_version,
        annotators=people,
        method="manual",
        trace_ids=[t.pk for t in traces],
        by=manager,
    )
    round_open(round=rnd, by=manager)
    for k, user in enumerate(people):
        for t in traces:
            _label(rnd, user, t, (k + 1, "Coder"))
    round_start_review(round=rnd, by=manager)
    c = Client()
    c.force_login(manager)
    page = reverse("annotations:round_disagreements", args=[project.slug, rnd.pk]) + "?status=all"
    html = c.get(page).content.decode()
    assert html.count('class="attr-badge"') == n
    with django_assert_num_queries(19):  # +1: the traces withheld from her (blind again now)
        c.get(page)


def test_adjudicating_on_the_page_takes_one_raters_answer(review_round, manager):
    from django.test import Client
    from django.urls import reverse

    rnd, traces, _ = review_round
    c = Client()
    c.force_login(manager)
    url = reverse("annotations:attribution_adjudicate", args=[rnd.project.slug, rnd.pk, traces[3].pk])
    html = c.post(url, {"choice": "rater:2", "note": "cat read step 14 right"}, HTTP_HX_REQUEST="true").content.decode()
    d = AttributionDecision.objects.get(round=rnd, trace=traces[3])
    assert (d.decisive_step, d.agent, d.basis, d.note) == (14, "Tester", "adjudicated", "cat read step 14 right")
    assert "step 14 · Tester · adjudicated" in html
    bad = c.post(url, {"choice": "other", "step": "x"}, HTTP_HX_REQUEST="true").content.decode()
    assert "must be a step number" in bad


def test_releases_carry_the_agreed_attribution_in_every_format(review_round, manager, settings, tmp_path):
    import csv
    import io
    import json
    from pathlib import Path

    import pyarrow.parquet as pq

    from annotations.models import Release
    from annotations.releases.services import release_build, release_create

    settings.MEDIA_ROOT = tmp_path / "media"
    rnd, traces, _ = review_round
    for t in traces[1:]:
        attribution_adjudicate(round=rnd, trace=t, step=4, modes=["1.1"], reason="ZQX agreed reason", by=manager)
    round_close(round=rnd, by=manager)
    release = release_create(
        project=rnd.project, by=manager, options={"formats": ["jsonl", "csv", "parquet"]}, enqueue=False
    )
    release = release_build(release_id=release.pk)
    assert release.status == Release.Status.DONE, release.error
    files = {f.kind: f for f in release.files.all()}
    step4 = traces[2].steps.get(index=4)
    expected = {
        "step_id": step4.pk,
        "step_index": 4,
        "no_single_step": False,
        "agent": "Coder",
        "modes": ["1.1"],
        "reason": "ZQX agreed reason",
        "basis": "adjudicated",
        "round": "Attribution round",
    }

    def path(kind):
        return Path(settings.MEDIA_ROOT) / files[kind].path

    rows = [json.loads(line) for line in path("jsonl").read_text(encoding="utf-8").splitlines()]
    by_pk = {r["mast_studio"]["trace_pk"]: r["mast_studio"]["attribution"] for r in rows}
    assert by_pk[traces[2].pk] == expected
    assert by_pk[traces[0].pk]["basis"] == "unanimous" and by_pk[traces[0].pk]["step_index"] == 3
    table = pq.read_table(path("parquet")).to_pylist()
    studio = {json.loads(r["mast_studio"])["trace_pk"]: json.loads(r["mast_studio"]) for r in table}
    assert studio[traces[2].pk]["attribution"] == expected
    with open(path("csv"), encoding="utf-8") as f:
        csv_rows = list(csv.DictReader(io.StringIO(f.read())))
    row = next(r for r in csv_rows if r["content_hash"] == traces[2].content_hash)
    assert (row["decisive_step_id"], row["decisive_step"], row["responsible_agent"]) == (str(step4.pk), "4", "Coder")
    assert (row["attribution_modes"], row["attribution_reason"], row["no_single_step"]) == (
        "1.1",
        "ZQX agreed reason",
        "0",
    )
