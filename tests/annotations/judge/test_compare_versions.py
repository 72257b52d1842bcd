"""Every judge measured on every version: after the project moves to a revised taxonomy version,
Compare judges compares each judge on the version it labelled (the humans' agreed labels carried
there through the mappings) and on the working version (the judge's labels carried), says which
version each number is on and how many labels came through a mapping, and says why a comparison
cannot be made instead of showing an empty table."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from annotations.judge.comparison import comparison_choices, judge_comparison
from annotations.judge.imported import rater_import
from annotations.judge.runs import judge_run_create
from taxonomy.services import mode_split, version_draft_from, version_publish
from tests.annotations.conftest import drive, make_judge_traces
from tests.annotations.judge.test_judge_web import closed_round
from traces.projects.services import project_working_version_set

pytestmark = pytest.mark.django_db


def _world(project, manager, llm_server):
    """Six traces agreed on v1 (1.1 on odd traces, 1.2 on even ones), an LLM run and an imported rater
    on v1 (the rater copies the consensus but says 1.2 everywhere), then v2 splits 1.2 into 1.2a and
    1.2b and becomes the working version."""
    v1 = project.taxonomy_version
    traces = make_judge_traces(project, 6)
    closed_round(project, traces, {t.pk: ({"1.1"} if i % 2 else {"1.2"}) for i, t in enumerate(traces)})
    run = drive(
        judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
        )
    )
    assert run.state == "done", run.error
    rows = [{"content_hash": t.content_hash, "modes": {"1.1": i % 2 == 1, "1.2": True}} for i, t in enumerate(traces)]
    rater = rater_import(
        project=project, by=manager, name="lab", text="\n".join(map(json.dumps, rows)), filename="l.jsonl"
    )
    v2 = version_draft_from(source=v1, by=manager)
    mode_split(
        mode=v2.modes.get(code="1.2"),
        into=[
            {"code": "1.2a", "name": "Repetition in planning", "definition": "Repeats a planned step."},
            {"code": "1.2b", "name": "Repetition in acting", "definition": "Repeats an executed step."},
        ],
    )
    version_publish(version=v2, by=manager)
    project_working_version_set(project=project, version=v2, by=manager)
    sources = {c.key: c for c in comparison_choices(project=project)}
    return v1, v2, sources[f"run:{run.pk}"], sources[f"rater:{rater.rater.pk}"]


def test_judges_of_the_earlier_version_are_compared_on_it_and_on_the_working_version(project, manager, llm_server):
    v1, v2, run, rater = _world(project, manager, llm_server)
    result = judge_comparison(project=project, user=manager, sources=[run, rater], n_boot=50)
    on = {sec["version"].pk: sec for sec in result["sections"]}
    assert [sec["version"].pk for sec in result["sections"]] == [v1.pk, v2.pk]
    assert on[v2.pk]["is_working"] and not on[v1.pk]["is_working"]
    # on v1: everything native; the imported rater is right on 1.1, on every trace
    first = on[v1.pk]
    assert first["n_reference_traces"] == 6 and first["reference_via_mapping"] == 0
    lab = next(r for r in first["raters"] if r["source"] == rater)
    assert lab["native"] == 12 and lab["via_mapping"] == 0
    assert lab["stats"]["modes"][0]["kappa"].value == pytest.approx(1.0)
    # on v2: the humans' and the judges' labels come through the mapping, with numbers
    second = on[v2.pk]
    assert second["n_reference_traces"] == 6 and second["reference_via_mapping"] > 0
    llm = next(r for r in second["raters"] if r["source"] == run)
    assert llm["native"] == 0 and llm["via_mapping"] > 0 and llm["own_version"] == v1.label
    assert llm["stats"]["pooled"]["n_traces"] == 6 and llm["stats"]["pooled"]["accuracy"].value is not None
    # the rater's "1.2 present" cannot say which part: 1.2a and 1.2b are undecided, and the page says why
    lab2 = next(r for r in second["raters"] if r["source"] == rater)
    codes = [m.code for m in second["modes"]]
    why = lab2["stats"]["modes"][codes.index("1.2a")]["why"]
    assert why == (
        f"this rater labelled {v1.label}; no mapping from it to {v2.label} decides 1.2a "
        "(a split: which part is not recorded)"
    )
    assert lab2["unknown"] == 12  # 6 traces x two parts
    assert lab2["stats"]["modes"][codes.index("1.1")]["kappa"].value == pytest.approx(1.0)
    # judge against judge on both versions
    assert on[v1.pk]["pairs"][0]["n_traces"] == 6 and on[v2.pk]["pairs"][0]["n_traces"] == 6


def test_a_version_no_mapping_reaches_says_why_instead_of_an_empty_table(project, manager, llm_server):
    from taxonomy.services import version_import

    v1, v2, run, _rater = _world(project, manager, llm_server)
    other = version_import(
        data={
            "format": "mast-taxonomy/1",
            "name": "Unrelated taxonomy",
            "categories": [{"code": "X", "name": "X"}],
            "modes": [{"code": "X.1", "name": "Something else", "definition": "Not a MAST mode."}],
        },
        publish=True,
        by=manager,
    )
    result = judge_comparison(project=project, user=manager, sources=[run], taxonomy_version=other, n_boot=20)
    (sec,) = result["sections"]
    assert not sec["raters"] and sec["n_reference_traces"] == 0
    assert (
        sec["left_out"][0]["why"] == f"this run labelled {v1.label}; no recorded mapping connects it to {other.label}"
    )
    assert "no agreed label of the project's closed rounds reaches Unrelated taxonomy v1" in sec["why_no_reference"]


def test_page_api_and_downloads_name_the_version_of_every_number(client, project, manager, llm_server):
    v1, v2, run, rater = _world(project, manager, llm_server)
    client.force_login(manager)
    q = {"s": [run.key, rater.key]}
    api = client.get(f"/api/projects/{project.slug}/judge-comparison/", q).json()
    assert [c["reference"]["taxonomy_version_label"] for c in api["comparisons"]] == [v1.label, v2.label]
    on_v2 = api["comparisons"][1]
    assert on_v2["reference"]["is_working_version"] and on_v2["reference"]["labels_via_mapping"] > 0
    llm = next(r for r in on_v2["raters"] if r["key"] == run.key)
    assert llm["labelled_version"] == v1.label and llm["labels_via_mapping"] > 0
    assert llm["pooled"]["accuracy"]["value"] is not None
    url = reverse("annotations:judge_compare", args=[project.slug])
    html = client.get(url, q).content.decode()
    assert f"On {v1.label}" in html and f"On {v2.label}" in html and "working version" in html
    assert "carried from other versions through the recorded mappings" in html
    assert "no mapping from it to" in html and "decides 1.2a" in html
    rows = list(csv.DictReader(io.StringIO(client.get(url, {**q, "format": "csv"}).content.decode())))
    pooled = {(r["taxonomy_version"], r["rater"]): r for r in rows if r["mode"] == "pooled"}
    assert set(pooled) == {(v, s.label) for v in (v1.label, v2.label) for s in (run, rater)}
    assert int(pooled[(v2.label, run.label)]["labels_via_mapping"]) == llm["labels_via_mapping"]
    tex = client.get(url, {**q, "format": "tex"}).content.decode()
    assert f"on {v1.label}" in tex and f"on {v2.label}" in tex and r"$^\ddagger$" in tex
    # one version asked for: only that one
    only = client.get(f"/api/projects/{project.slug}/judge-comparison/", {**q, "version": v2.pk}).json()
    assert [c["reference"]["taxonomy_version"] for c in only["comparisons"]] == [v2.pk]
    bad = client.get(f"/api/projects/{project.slug}/judge-comparison/", {**q, "version": 99999})
    assert bad.status_code == 400 and "99999" in json.dumps(bad.json())


def test_a_run_on_the_new_version_is_scored_against_labels_carried_onto_it(project, manager, llm_server, client):
    from annotations.judge.selectors import judge_quality

    v1, v2, _run, _rater = _world(project, manager, llm_server)
    run = drive(
        judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
        )
    )
    assert run.taxonomy_version == v2 and run.state == "done", run.error
    q = judge_quality(run=run, user=manager)
    assert q["taxonomy_version"] == v2.label and q["n_compared_traces"] == 6
    # 13 modes carried as they are, 1.2 split in two: 15 units a trace, less the undecided ones below
    assert q["reference_via_mapping"] == 6 * 15 - 2 * 3
    assert q["reference_unknown"] == 2 * 3  # 1.2 present on three traces: which part is not recorded
    client.force_login(manager)
    api = client.get(f"/api/projects/{project.slug}/judge-runs/{run.pk}/quality/").json()
    assert api["reference_via_mapping"] == q["reference_via_mapping"] and api["taxonomy_version"] == v2.label
    page = client.get(reverse("annotations:judge_quality", args=[project.slug, run.pk])).content.decode()
    assert "came from other versions through the recorded mappings" in page


def test_a_manager_labelling_a_trace_blind_compares_without_its_consensus(project, manager, annotator, llm_server):
    from tests.annotations.rounds_factories import make_open_round

    v1, v2, run, rater = _world(project, manager, llm_server)
    before = judge_comparison(project=project, user=manager, sources=[run], n_boot=20)["sections"][0]
    shared = project.traces.order_by("pk").first()
    make_open_round(project, manager=manager, annotators=[manager, annotator], traces=[shared], name="Blind again")
    after = judge_comparison(project=project, user=manager, sources=[run], n_boot=20)["sections"][0]
    assert before["n_reference_traces"] == 6 and before["n_blind_traces"] == 0
    assert after["n_reference_traces"] == 5 and after["n_blind_traces"] == 1


def test_few_shot_examples_are_left_out_of_the_runs_scores_on_compare_judges(project, manager, llm_server):
    from annotations.judge.excluded import scored_trace_exclusions

    v1, v2, _run, _rater = _world(project, manager, llm_server)
    run = drive(
        judge_run_create(
            project=project,
            by=manager,
            provider="openai",
            base_url=llm_server.url,
            model="m",
            few_shot=True,
            start=False,
        )
    )
    excluded, why = scored_trace_exclusions(run)
    assert run.state == "done" and excluded, run.error
    source = next(c for c in comparison_choices(project=project) if c.key == f"run:{run.pk}")
    sec = judge_comparison(project=project, user=manager, sources=[source], n_boot=20)["sections"][0]
    (row,) = sec["raters"]
    assert row["n_excluded"] == len(excluded) and row["excluded_reason"] == why
    assert row["stats"]["pooled"]["n_traces"] == 6 - len(excluded)
