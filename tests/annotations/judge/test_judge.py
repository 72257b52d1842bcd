"""The judge's per-trace work against a real chat-completions server on 127.0.0.1 (in-process driver).

The worker-process behaviour (concurrency, crash safety) is in test_judge_worker.py.
"""

import json
import time

import pytest
from django.core.exceptions import ValidationError

from annotations.judge.dispatch import judge_run_dispatch
from annotations.judge.prompts import prompt_template_active, prompt_template_save
from annotations.judge.runs import judge_run_cancel, judge_run_create, judge_run_resume, judge_run_start
from annotations.judge.worker import judge_item_process
from annotations.models import Annotation, JudgeCache, JudgeItem, ModeLabel, Rater
from tests.annotations.conftest import drive, make_judge_traces
from tests.llm_server import Drop, Reply, Status, codes_of, good_answer

pytestmark = pytest.mark.django_db


def new_run(project, manager, server, **kw):
    kw.setdefault("concurrency", 2)
    kw.setdefault("timeout", 5)
    return judge_run_create(
        project=project, by=manager, provider="openai", base_url=server.url, model="test-model", start=False, **kw
    )


def codes(project):
    return list(project.taxonomy_version.modes.order_by("order", "code").values_list("code", flat=True))


def test_good_answers_become_submitted_annotations_of_an_llm_rater(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 3)
    run = drive(new_run(project, manager, llm_server))
    assert run.state == "done" and run.n_done == 3 and run.n_failed == 0
    rater = run.rater
    assert rater.kind == Rater.Kind.LLM and rater.name == "test-model · prompt v1"
    anns = Annotation.objects.filter(rater=rater)
    assert anns.count() == 3
    ann = anns.first()
    assert ann.state == "submitted" and ann.round is None and ann.taxonomy_version == project.taxonomy_version
    assert ann.labels.count() == 14
    first = ann.labels.get(mode__code="1.1")
    assert first.decision == "present" and first.evidence == [{"step": 0}] and first.rationale
    assert set(ann.source) >= {"run", "item", "tokens_in", "tokens_out", "latency_ms", "cost"}
    assert run.tokens_in == 3000 and run.tokens_out == 600


def test_the_prompt_sends_steps_definitions_and_asks_for_json(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    drive(new_run(project, manager, llm_server))
    body = llm_server.requests[0]
    prompt = body["messages"][-1]["content"]
    assert "[step 0] Coder:" in prompt and "[step 3] Planner:" in prompt
    assert "Disobey Task Specification".lower() in prompt.lower() or "1.1" in prompt
    assert body["response_format"] == {"type": "json_object"}
    assert codes_of(body) == codes(project)


def test_server_refusing_response_format_gets_plain_requests(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 2)
    llm_server.push(Status(400, {"error": {"message": "Unknown parameter: response_format"}}))
    run = drive(new_run(project, manager, llm_server, concurrency=1))
    assert run.state == "done" and run.n_done == 2 and run.json_mode is False
    assert "response_format" not in llm_server.requests[-1]


def test_garbage_gets_one_repair_request_then_a_good_answer(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Reply("I think there are some failures, hard to say."))
    run = drive(new_run(project, manager, llm_server))
    assert run.state == "done" and run.n_done == 1
    assert llm_server.n_requests == 2
    repair = llm_server.requests[1]["messages"]
    assert repair[-2]["role"] == "assistant" and "hard to say" in repair[-2]["content"]
    assert "could not be used" in repair[-1]["content"]


def test_garbage_twice_fails_the_item_and_keeps_the_raw_answers(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Reply("garbage one"), Reply('{"modes": [{"code": "1.1", "present": true}]}'))
    run = drive(new_run(project, manager, llm_server))
    item = JudgeItem.objects.get(run=run)
    assert item.state == "failed" and run.n_failed == 1
    assert "garbage one" in item.raw_answer and '"1.1"' in item.raw_answer
    assert "no answer for mode(s) 1.2" in item.error
    assert not Annotation.objects.filter(rater=run.rater).exists()  # no half-filled labels
    assert run.state == "failed" and "Every item failed" in run.error


def test_slow_answer_times_out_and_is_retried(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Reply(good_answer(codes(project)), delay=2.5))
    run = drive(new_run(project, manager, llm_server, timeout=1))
    item = JudgeItem.objects.get(run=run)
    assert run.n_done == 1 and item.attempts == 2
    assert llm_server.n_requests == 2


def test_429_retry_after_is_honoured(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Status(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "2"}))
    drive(new_run(project, manager, llm_server))
    assert llm_server.n_requests == 2
    waited = llm_server.times[1] - llm_server.times[0]
    assert waited >= 2.0, f"the retry came {waited:.2f}s after the 429, before Retry-After"


def test_500s_are_retried_until_an_answer(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Status(500), Status(502), Status(503))
    run = drive(new_run(project, manager, llm_server))
    assert run.n_done == 1 and llm_server.n_requests == 4
    assert JudgeItem.objects.get(run=run).attempts == 4


def test_dropped_connection_is_retried(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Drop())
    run = drive(new_run(project, manager, llm_server))
    assert run.n_done == 1 and llm_server.n_requests == 2


def test_transient_faults_beyond_the_attempt_limit_fail_the_item_only(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 2)
    llm_server.push(*[Status(500)] * 4)  # fast_retries: 4 attempts
    run = drive(new_run(project, manager, llm_server, concurrency=1))
    assert run.state == "done" and run.n_done == 1 and run.n_failed == 1
    failed = JudgeItem.objects.get(run=run, state="failed")
    assert "gave up after 4 attempts" in failed.error


def test_401_stops_the_whole_run_with_a_clear_message(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 4)
    llm_server.push(Status(401, {"error": {"message": "Incorrect API key provided"}}))
    run = drive(new_run(project, manager, llm_server, concurrency=1))
    assert run.state == "failed"
    assert "401" in run.error and "API key was refused" in run.error and "Incorrect API key" in run.error
    assert llm_server.n_requests == 1
    assert JudgeItem.objects.filter(run=run, state="pending").count() == 4


def test_404_model_not_found_stops_the_run(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Status(404, {"error": {"message": "The model `nope` does not exist"}}))
    run = drive(new_run(project, manager, llm_server))
    assert run.state == "failed" and "does not exist" in run.error


def test_a_failed_run_resumes_and_finishes(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 3)
    llm_server.push(Status(401))
    run = drive(new_run(project, manager, llm_server, concurrency=1))
    assert run.state == "failed"
    judge_run_resume(run=run, by=manager)
    run = drive(run)
    assert run.state == "done" and run.n_done == 3


def test_missing_api_key_variable_stops_the_run(project, manager, llm_server, fast_retries, monkeypatch):
    fast_retries.MAST_JUDGE_API_KEYS = f"JUDGE_TEST_KEY={llm_server.url}"
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    make_judge_traces(project, 1)
    run = drive(new_run(project, manager, llm_server, api_key_env="JUDGE_TEST_KEY"))
    assert run.state == "failed" and "JUDGE_TEST_KEY" in run.error
    assert llm_server.n_requests == 0


def test_api_key_is_read_from_the_named_variable_and_never_stored(
    project, manager, llm_server, fast_retries, monkeypatch
):
    fast_retries.MAST_JUDGE_API_KEYS = f"JUDGE_TEST_KEY={llm_server.url}"
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-secret-123")
    make_judge_traces(project, 1)
    run = drive(new_run(project, manager, llm_server, api_key_env="JUDGE_TEST_KEY"))
    assert run.state == "done"
    stored = json.dumps(list(type(run).objects.filter(pk=run.pk).values()), default=str)
    assert "sk-secret-123" not in stored and run.api_key_env == "JUDGE_TEST_KEY"


def test_rerun_is_answered_from_the_cache(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 3)
    drive(new_run(project, manager, llm_server))
    seen = llm_server.n_requests
    assert JudgeCache.objects.count() == 3
    run2 = drive(new_run(project, manager, llm_server))
    assert llm_server.n_requests == seen  # zero new requests
    assert run2.n_done == 3 and run2.n_cached == 3 and run2.tokens_in == 0
    # the same rater keeps one annotation per trace
    assert Annotation.objects.filter(rater=run2.rater).count() == 3


def test_a_new_prompt_version_misses_the_cache(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    drive(new_run(project, manager, llm_server))
    active = prompt_template_active(taxonomy_version=project.taxonomy_version)
    prompt_template_save(taxonomy_version=project.taxonomy_version, text=active.text + "\nBe strict.", by=manager)
    run2 = drive(new_run(project, manager, llm_server))
    assert llm_server.n_requests == 2 and run2.rater.name == "test-model · prompt v2"


def test_duplicate_delivery_writes_one_result(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = new_run(project, manager, llm_server)
    judge_run_start(run_id=run.pk)
    item = JudgeItem.objects.get(run=run)
    assert judge_item_process(item_id=item.pk, claim=item.claim) == "done"
    assert judge_item_process(item_id=item.pk, claim=item.claim) == "skipped"
    assert Annotation.objects.filter(rater__name="test-model · prompt v1").count() == 1
    assert ModeLabel.objects.filter(annotation__rater__name="test-model · prompt v1").count() == 14
    assert llm_server.n_requests == 1


def test_stale_claim_is_skipped_without_a_call(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = new_run(project, manager, llm_server)
    judge_run_start(run_id=run.pk)
    item = JudgeItem.objects.get(run=run)
    assert judge_item_process(item_id=item.pk, claim=item.claim - 1) == "skipped"
    assert llm_server.n_requests == 0


def test_dispatch_claims_at_most_the_concurrency_limit(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 10)
    run = new_run(project, manager, llm_server, concurrency=3)
    judge_run_start(run_id=run.pk)
    assert JudgeItem.objects.filter(run=run, state="running").count() == 3
    assert judge_run_dispatch(run_id=run.pk) == 0  # full: nothing more


def test_expired_lease_is_claimed_again(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = new_run(project, manager, llm_server, concurrency=1)
    judge_run_start(run_id=run.pk)
    item = JudgeItem.objects.get(run=run)
    JudgeItem.objects.filter(pk=item.pk).update(lease_until="2000-01-01T00:00:00Z")
    judge_run_dispatch(run_id=run.pk)  # a plain top-up leaves a claimed item alone
    assert JudgeItem.objects.get(pk=item.pk).claim == item.claim
    judge_run_dispatch(run_id=run.pk, reclaim=True)  # the sweep takes it back
    again = JudgeItem.objects.get(pk=item.pk)
    assert again.state == "running" and again.claim == item.claim + 1


def test_cancel_stops_handing_out_items_and_resume_finishes(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 4)
    run = new_run(project, manager, llm_server, concurrency=1)
    judge_run_start(run_id=run.pk)
    judge_run_cancel(run=run, by=manager)
    item = JudgeItem.objects.get(run=run, state="running")
    assert judge_item_process(item_id=item.pk, claim=item.claim) == "stopped"
    assert llm_server.n_requests == 0
    assert JudgeItem.objects.filter(run=run, state="pending").count() == 4
    judge_run_resume(run=run, by=manager)
    run = drive(run)
    assert run.state == "done" and run.n_done == 4


def test_token_budget_pauses_the_run(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 5)
    run = drive(new_run(project, manager, llm_server, concurrency=1, budget_tokens=2000))
    assert run.state == "paused" and "budget" in run.error
    assert run.n_done == 2


def test_long_trace_is_cut_and_the_item_says_how(project, manager, llm_server, fast_retries, settings):
    settings.MAST_JUDGE_MAX_CHARS = 3000
    make_judge_traces(project, 1, n_steps=60, words="lorem ipsum " * 20)
    run = drive(new_run(project, manager, llm_server))
    item = JudgeItem.objects.get(run=run)
    assert item.truncated and item.truncation["steps_omitted"] > 0
    assert run.n_truncated == 1
    assert "steps omitted ...]" in llm_server.requests[0]["messages"][-1]["content"]


def test_few_shot_examples_come_from_adjudicated_labels(project, manager, annotator, llm_server, fast_retries):
    from annotations.models import Adjudication, Round, RoundTrace

    traces = make_judge_traces(project, 3)
    rnd = Round.objects.create(project=project, name="R", taxonomy_version=project.taxonomy_version, state="closed")
    RoundTrace.objects.create(round=rnd, trace=traces[0])
    mode = project.taxonomy_version.modes.get(code="2.3")
    Adjudication.objects.create(round=rnd, trace=traces[0], mode=mode, decision="present", basis="adjudicated")
    run = drive(new_run(project, manager, llm_server, few_shot=True))
    assert run.prompt_extras["few_shot"][0]["present"] == ["2.3"]
    assert "Agreed answer" in llm_server.requests[0]["messages"][-1]["content"]


def test_selection_of_a_round_freezes_its_trace_ids(project, manager, llm_server):
    from annotations.models import Round, RoundTrace

    traces = make_judge_traces(project, 4)
    rnd = Round.objects.create(project=project, name="R", taxonomy_version=project.taxonomy_version)
    for t in traces[:2]:
        RoundTrace.objects.create(round=rnd, trace=t)
    run = new_run(project, manager, llm_server, traces=f"round:{rnd.pk}")
    assert run.trace_ids == [traces[0].pk, traces[1].pk] and run.n_total == 2


def test_unlabelled_selection_skips_traces_with_human_labels(project, manager, annotator, llm_server):
    from annotations.labels.services import rater_for_user

    traces = make_judge_traces(project, 3)
    Annotation.objects.create(
        trace=traces[0],
        rater=rater_for_user(user=annotator),
        taxonomy_version=project.taxonomy_version,
        state="submitted",
    )
    run = new_run(project, manager, llm_server, traces="unlabelled")
    assert traces[0].pk not in run.trace_ids and run.n_total == 2


def test_bad_settings_are_refused_with_the_field_named(project, manager):
    make_judge_traces(project, 1)
    with pytest.raises(ValidationError) as exc:
        judge_run_create(project=project, by=manager, provider="openai", base_url="ftp://x", model="", concurrency=0)
    assert {"base_url", "model", "concurrency"} <= set(exc.value.message_dict)


def test_prompt_edit_creates_a_new_version_and_keeps_the_old(project, manager):
    v1 = prompt_template_active(taxonomy_version=project.taxonomy_version)
    v2 = prompt_template_save(taxonomy_version=project.taxonomy_version, text=v1.text + "\nMore.", by=manager)
    v1.refresh_from_db()
    assert (v1.number, v1.is_active, v2.number, v2.is_active) == (1, False, 2, True)
    with pytest.raises(ValidationError):
        prompt_template_save(taxonomy_version=project.taxonomy_version, text="no trace here", by=manager)


def test_retry_backoff_grows_with_jitter():
    from annotations.judge.providers.base import RetryPolicy

    p = RetryPolicy(base=1, cap=30, first=0.1)
    d = [p.delay(n, status=500) for n in range(1, 6)]
    assert 0.05 <= d[0] <= 0.1 and 1 <= d[1] <= 2 and 8 <= d[4] <= 16
    assert p.delay(1, retry_after=7) == 7
    assert time.time()  # keep the import honest


def test_the_first_retry_of_a_server_error_is_prompt_but_a_rate_limit_backs_off():
    """A 5xx or a timeout is retried after a short jittered pause (the run's last traces would
    otherwise wait out a full backoff); a 429 starts at the full base, and Retry-After wins."""
    from annotations.judge.providers.base import RetryPolicy

    p = RetryPolicy(base=0.5, cap=30, first=0.05)
    assert all(0.025 <= p.delay(1, status=s) <= 0.05 for s in (500, 503, None) for _ in range(20))
    assert all(0.25 <= p.delay(1, status=429) <= 0.5 for _ in range(20))
    assert p.delay(1, retry_after=0.1, status=429) >= 0.25
    assert p.delay(1, retry_after=2.0, status=500) == 2.0


@pytest.mark.django_db(transaction=True)  # the successor is handed over after commit
def test_a_task_labels_the_successors_it_claims_itself(project, manager, llm_server, fast_retries):
    """prelabel_trace keeps each successor its result claimed and labels it in the same thread
    (dispatch.ChainDispatcher): at concurrency 1 one task does the whole run, sending nothing."""
    from annotations.judge.dispatch import INLINE
    from annotations.judge.tasks import prelabel_trace

    make_judge_traces(project, 4)
    run = new_run(project, manager, llm_server, concurrency=1)
    judge_run_start(run_id=run.pk, dispatcher=INLINE)
    (item_id, claim) = JudgeItem.objects.filter(run=run, state="running").values_list("id", "claim").get()
    prelabel_trace(item_id, claim)
    run.refresh_from_db()
    assert run.state == "done" and run.n_done == 4 and llm_server.n_requests == 4
    assert Annotation.objects.filter(rater=run.rater).count() == 4
