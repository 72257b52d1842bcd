"""Baseline runs with honest scores: cross-fitted answers on training traces, training through the
version mappings, no Resume that can only fail again; few-shot example traces left out of scores."""

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotations.judge.providers import baseline_model
from annotations.judge.runs import judge_run_create, judge_run_resume, judge_run_start
from annotations.judge.selectors import judge_quality, trace_texts
from annotations.models import Annotation, JudgeItem
from taxonomy.services import mode_rename, mode_split, version_draft_from, version_publish
from tests.annotations.conftest import drive, make_judge_traces, post_run_form
from tests.annotations.judge.test_judge_web import closed_round

pytestmark = pytest.mark.django_db


def memorisable_traces(project, n=16):
    """Trace k says ``memo<k>`` in every step and nothing else of its own; 1.1 is present on the
    even ones: a model that saw a trace's label can reproduce it, one that did not cannot."""
    traces = [make_judge_traces(project, 1, words=f"memo{k}", start=k)[0] for k in range(n)]
    present = {t.pk: {"1.1"} for k, t in enumerate(traces) if k % 2 == 0}
    closed_round(project, traces, present)
    return traces, present


def baseline(project, manager, **kw):
    run = judge_run_create(project=project, by=manager, provider="baseline", start=False, **kw)
    judge_run_start(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_stored_baseline_answers_on_training_traces_are_cross_fitted(project, manager, client):
    traces, present = memorisable_traces(project)
    run = baseline(project, manager)
    assert run.state == "done" and run.baseline_info["scores"] == "cross-fitted (k-fold, k=5)"

    # the same training set, by hand: in-sample the model reproduces every label ...
    ids = sorted(t.pk for t in traces)
    texts = trace_texts(ids)
    codes = [m["code"] for m in run.baseline_info["modes"]]
    y = np.array([[float(c in present.get(t, set())) for c in codes] for t in ids])
    j = codes.index("1.1")
    in_sample = baseline_model.train([texts[t] for t in ids], y, codes).predict_proba([texts[t] for t in ids])
    assert ((in_sample[:, j] >= 0.5) == (y[:, j] == 1)).all()
    # ... cross-fitted it cannot, and the stored answers are the cross-fitted ones
    crossed = baseline_model.cross_fit([texts[t] for t in ids], y, codes)
    crossed_present = {t: bool(crossed.proba[i, j] >= 0.5) for i, t in enumerate(ids)}
    stored = dict(
        Annotation.objects.filter(rater=run.rater, labels__mode__code="1.1").values_list("trace_id", "labels__decision")
    )
    assert {t: d == "present" for t, d in stored.items()} == crossed_present

    q = judge_quality(run=run, user=manager)
    m11 = next(m for m in q["modes"] if m["code"] == "1.1")
    expected = sum(crossed_present[t] == (t in present) for t in ids) / len(ids)
    assert m11["accuracy"]["value"] == pytest.approx(expected) and expected < 1.0
    assert not q["in_sample"] and "cross-fitted" in q["cross_fitted"]

    item = JudgeItem.objects.filter(run=run).first()
    assert item.parsed["cross_fitted"] is True and 1 <= item.parsed["fold"] <= 5

    client.force_login(manager)
    note = "scores on training traces are cross-fitted: each trace was predicted by a model that did not see it (k=5)"
    for name in ("annotations:judge_run", "annotations:judge_quality"):
        body = client.get(reverse(name, args=[project.slug, run.pk])).content.decode()
        assert note in body.lower(), name


def test_a_trace_outside_the_training_set_is_answered_by_the_model_fitted_on_all(project, manager):
    traces, _present = memorisable_traces(project, 12)
    outside = make_judge_traces(project, 1, words="memo0", start=99)[0]
    run = baseline(project, manager)
    item = JudgeItem.objects.get(run=run, trace=outside)
    assert item.parsed["in_training_set"] is False and "cross_fitted" not in item.parsed
    ids = sorted(t.pk for t in traces)
    texts = trace_texts([*ids, outside.pk])
    codes = [m["code"] for m in run.baseline_info["modes"]]
    y = np.array([[float(c == "1.1" and k % 2 == 0) for c in codes] for k in range(len(ids))])
    full = baseline_model.train([texts[t] for t in ids], y, codes).predict_proba([texts[outside.pk]])
    assert [m["probability"] for m in item.parsed["modes"]] == [round(float(p), 4) for p in full[0]]
    assert JudgeItem.objects.get(run=run, trace=traces[0]).parsed["in_training_set"] is True


@pytest.fixture
def v2(mast_version, manager):
    """MAST v2: 1.2 renamed to 1.8, 1.1 split into 1.1 and 1.7, published."""
    draft = version_draft_from(source=mast_version, by=manager)
    mode_rename(mode=draft.modes.get(code="1.2"), new_code="1.8")
    mode_split(
        mode=draft.modes.get(code="1.1"),
        into=[
            {"code": "1.1", "name": "Disobey task spec", "definition": "Ignores the task."},
            {"code": "1.7", "name": "Disobey format", "definition": "Ignores the output format."},
        ],
    )
    return version_publish(version=draft)


def test_a_baseline_on_a_new_version_trains_on_the_older_agreed_labels_through_the_mapping(project, manager, v2):
    traces = make_judge_traces(project, 6, words="plain") + make_judge_traces(project, 6, words="crash", start=50)
    # round on v1: 1.1 present on the crashing traces, 1.2 on two plain ones
    closed_round(project, traces, {t.pk: {"1.1"} for t in traces[6:]} | {t.pk: {"1.2"} for t in traces[:2]})
    project.taxonomy_version = v2
    project.save()
    run = baseline(project, manager, taxonomy_version=v2)
    assert run.state == "done", run.error
    info = run.baseline_info
    assert info["trained_on"] == f"agreed labels of {project.slug}" and info["n_train"] == 12
    (row,) = [m for m in info["mapping"] if m["version"] == "MAST v1"]
    assert (row["labels"], row["unknown"]) == (12 * 14, 6)
    # every v1 label but the 6 present 1.1 (which half of the split?) is carried onto v2; 18 of
    # the training labels end under another code: 1.2 as 1.8 (12), an absent 1.1 also as absent 1.7 (6)
    assert info["n_mapped"] == row["mapped"] == 12 * 14 - 6
    assert info["n_recoded"] == 18
    assert info["unknown"] == {"1.1": 6, "1.7": 6}
    modes = {m["code"]: m for m in info["modes"]}
    assert (modes["1.8"]["n_positive"], modes["1.1"]["n_positive"], modes["1.1"]["n_negative"]) == (2, 0, 6)


def test_a_baseline_that_cannot_be_trained_is_titled_as_the_baseline_and_offers_no_resume(
    client, project, manager, llm_server
):
    from annotations.models import ProviderConnection

    make_judge_traces(project, 3)
    conn = ProviderConnection.objects.create(
        project=project, name="local", base_url=llm_server.url, models_list=["gpt-4o-mini"]
    )
    client.force_login(manager)
    # the form sends the connection and the model fields as they stand: the baseline takes neither
    resp = post_run_form(client, project, provider="baseline", connection=str(conn.pk), model="gpt-4o-mini")
    assert resp.status_code == 302, resp.content.decode()[:2000]
    run = project.judge_runs.get()
    assert run.model == baseline_model.NAME and run.connection is None
    judge_run_start(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == "failed" and "Nothing to train" in run.error
    page = client.get(reverse("annotations:judge_run", args=[project.slug, run.pk])).content.decode()
    assert "Baseline classifier" in page and "gpt-4o-mini" not in page
    assert ">Resume</button>" not in page and "then start a new baseline run" in page
    listing = client.get(reverse("annotations:judge_list", args=[project.slug])).content.decode()
    assert "Baseline classifier" in listing and "gpt-4o-mini" not in listing
    with pytest.raises(ValidationError, match="fail again"):
        judge_run_resume(run=run, by=manager)


def test_few_shot_example_traces_are_left_out_of_the_runs_scores(client, project, manager, llm_server, fast_retries):
    traces = make_judge_traces(project, 5)
    closed_round(project, traces, {traces[0].pk: {"2.3"}, traces[1].pk: {"1.1"}})
    run = drive(
        judge_run_create(
            project=project,
            by=manager,
            provider="openai",
            base_url=llm_server.url,
            model="test-model",
            few_shot=True,
            start=False,
            timeout=5,
        )
    )
    examples = {f["trace_id"] for f in run.prompt_extras["few_shot"]}
    assert run.state == "done" and len(examples) == 3
    q = judge_quality(run=run, user=manager)
    assert q["n_excluded_traces"] == 3 and q["n_compared_traces"] == 2
    assert {d["trace_id"] for d in q["disagreements"]}.isdisjoint(examples)
    assert q["overall"]["n"] == 2 * 14
    client.force_login(manager)
    page = client.get(reverse("annotations:judge_quality", args=[project.slug, run.pk])).content.decode()
    assert "3 trace(s) shown to the judge as few-shot examples" in page
    api = client.get(f"/api/projects/{project.slug}/judge-runs/{run.pk}/quality/").json()
    assert api["n_excluded_traces"] == 3
