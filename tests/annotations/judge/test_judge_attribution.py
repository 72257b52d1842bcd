"""The judge asked for attribution over an imported Who&When file: accuracies equal a hand count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotations.judge import prompting
from annotations.judge.attribution import attribution_accuracy, judge_attribution_quality
from annotations.judge.prompts import prompt_template_save
from annotations.judge.runs import judge_run_create
from annotations.models import Attribution
from tests.annotations.conftest import drive, make_judge_traces
from tests.llm_server import LLMServer, Reply, codes_of, good_answer
from traces.importing.service import traces_import

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import" / "whowhen"

# What the scripted judge says per trace (recognised by words of its trace) and what Who&When says:
#   ww-1 (17 * 3):  judge Coder, step 1       truth Coder, 1     agent right, step right
#   ww-2 (Sydney):  judge " planner", step 3  truth Planner, 2   agent right (case, spaces), step wrong
#   ww-3 (spiders): judge gives no attribution truth Planner, 0  both wrong (no answer counts wrong)
ATTRIBUTIONS = {"17 * 3": {"agent": "Coder", "step": 1}, "Sydney": {"agent": " planner", "step": 3}, "spiders": None}


def scripted(body: dict):
    prompt = "\n".join(m["content"] for m in body["messages"])
    answer = json.loads(good_answer(codes_of(body), present=["1.1"]))
    for words, attribution in ATTRIBUTIONS.items():
        if words in prompt and attribution is not None:
            answer["attribution"] = {**attribution, "reason": "scripted"}
    return Reply(json.dumps(answer))


@pytest.fixture
def server():
    s = LLMServer(default=scripted).start()
    yield s
    s.stop()


@pytest.fixture
def judged(project, manager, server, fast_retries):
    traces_import(project=project, paths_or_files=sorted(FIXTURES.glob("ww-*.json")))
    prompt_template_save(
        taxonomy_version=project.taxonomy_version,
        text=prompting.DEFAULT_TEMPLATE + "\n{attribution_format}\n",
        by=manager,
        notes="with attribution",
    )
    run = judge_run_create(
        project=project, by=manager, provider="openai", base_url=server.url, model="m", start=False, concurrency=2
    )
    return drive(run)


def test_the_prompt_asks_for_the_decisive_step_and_agent(judged, server):
    prompt = server.requests[0]["messages"][1]["content"]
    assert '"attribution": {"agent"' in prompt
    assert "earliest step from which the failure could no longer be avoided" in prompt


def test_judge_attribution_is_stored_with_its_annotation(judged):
    rows = {
        a.annotation.trace.external_id: (a.agent, a.decisive_step)
        for a in Attribution.objects.filter(annotation__rater=judged.rater).select_related("annotation__trace")
    }
    assert rows == {"ww-1": ("Coder", 1), "ww-2": ("planner", 3)}


def test_agent_and_step_accuracy_equal_a_hand_computation(judged, manager):
    q = judge_attribution_quality(run=judged, user=manager)
    assert (q["agent"]["hit"], q["agent"]["n"]) == (2, 3)
    assert q["agent"]["value"] == pytest.approx(2 / 3)
    assert (q["step"]["hit"], q["step"]["n"]) == (1, 3)
    assert q["step"]["value"] == pytest.approx(1 / 3)
    assert q["references"] == {"Who&When ground truth": 3}
    assert q["n_without_attribution"] == 1


def test_the_quality_page_shows_the_attribution_block(judged, manager):
    c = Client()
    c.force_login(manager)
    html = c.get(reverse("annotations:judge_quality", args=[judged.project.slug, judged.pk])).content.decode()
    assert "agent-level accuracy: 2 of 3 traces" in html
    assert "step-level accuracy: 1 of 3 traces" in html


def test_mast_style_answers_without_attribution_still_parse():
    answer = prompting.parse_answer(good_answer(["1.1", "1.2"]), codes=["1.1", "1.2"], valid_steps=[0, 1])
    assert answer.attribution is None and "attribution" not in answer.as_dict()


def test_who_and_when_flat_fields_and_a_missing_step_are_read_with_a_warning():
    raw = json.dumps({**json.loads(good_answer(["1.1"])), "mistake_agent": "Coder", "mistake_step": "7"})
    answer = prompting.parse_answer(raw, codes=["1.1"], valid_steps=[0, 1, 2])
    assert answer.attribution == prompting.AttributionAnswer("Coder", None, "")
    assert "attribution: dropped step 7 (no such step)" in answer.warnings


def test_accuracy_counts_only_what_the_reference_gives():
    pairs = [(("A", None), ("a", 3)), (("", 4), ("B", 4)), (("C", 1), None)]
    out = attribution_accuracy(pairs)
    assert (out["agent"]["hit"], out["agent"]["n"], out["step"]["hit"], out["step"]["n"]) == (1, 2, 1, 2)


def test_the_quality_api_gives_the_pages_attribution_numbers(judged, manager, django_assert_num_queries):
    c = Client()
    c.force_login(manager)
    slug = judged.project.slug
    url = f"/api/projects/{slug}/judge-runs/{judged.pk}/quality/"
    c.get(url)  # the session and the user's role are read once; the pinned count is the request's own
    with django_assert_num_queries(18):  # labels carried through the mappings, the blind rule
        data = c.get(url).json()["attribution"]
    assert data["agent"] == {"value": pytest.approx(2 / 3), "hit": 2, "n": 3, "undefined": None}
    assert data["step"] == {"value": pytest.approx(1 / 3), "hit": 1, "n": 3, "undefined": None}
    assert data["references"] == {"Who&When ground truth": 3}
    assert data["n_without_attribution"] == 1
    html = c.get(reverse("annotations:judge_quality", args=[slug, judged.pk])).content.decode()
    for level in ("agent", "step"):
        stat = data[level]
        shown = f'<b>{stat["value"]:.2f}</b><span class="muted small">{level}-level accuracy'
        assert f"{shown}: {stat['hit']} of {stat['n']} traces" in html
    assert f'<b>{data["n_without_attribution"]}</b><span class="muted small">answered without an attribution' in html


def test_the_quality_api_says_null_attribution_without_a_reference(project, manager, server, fast_retries):
    make_judge_traces(project, 2)
    run = drive(
        judge_run_create(project=project, by=manager, provider="openai", base_url=server.url, model="m", start=False)
    )
    c = Client()
    c.force_login(manager)
    data = c.get(f"/api/projects/{project.slug}/judge-runs/{run.pk}/quality/").json()
    assert "attribution" in data and data["attribution"] is None
