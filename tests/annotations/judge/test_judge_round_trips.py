"""The judge's per-trace statements: how many queries a trace costs, and what the batched writes keep.

A result is written in two round trips on PostgreSQL (``labels.bulk.sql_execute_batch``) and an
item is loaded with its steps in one (``judge.sql.load_item``): the worker's CPU and the round trips
per trace bound a run's throughput (bench/bench_judge.py), so the count is pinned here.
"""

import pytest

from annotations.judge.dispatch import INLINE
from annotations.judge.providers.base import TransientError
from annotations.judge.providers.openai_chat import parse_completion
from annotations.judge.runs import judge_run_create, judge_run_start
from annotations.judge.worker import judge_item_process
from annotations.models import Annotation, JudgeCache, JudgeItem, ModeLabel
from tests.annotations.conftest import drive, make_judge_traces
from tests.llm_server import Reply, Status, good_answer

pytestmark = pytest.mark.django_db


def new_run(project, manager, server, **kw):
    kw.setdefault("concurrency", 1)
    kw.setdefault("timeout", 5)
    return judge_run_create(
        project=project, by=manager, provider="openai", base_url=server.url, model="test-model", start=False, **kw
    )


def claimed(run):
    return JudgeItem.objects.filter(run=run, state="running").values_list("id", "claim").get()


def test_a_labelled_trace_costs_five_statements_on_postgresql(
    project, manager, llm_server, fast_retries, django_assert_num_queries
):
    """Load the item with its steps (1), look up the cache (1), lock the item (1), insert the
    annotation (1), then its labels, the item's result, the cache row, the successor's claim and
    the run's counters (1). Was 12 with one statement each. (In a test the result transaction is a
    savepoint inside the test's: its SAVEPOINT and RELEASE are two more queries.)"""
    make_judge_traces(project, 3)
    run = new_run(project, manager, llm_server)
    judge_run_start(run_id=run.pk, dispatcher=INLINE)
    judge_item_process(item_id=claimed(run)[0], claim=claimed(run)[1], dispatcher=INLINE)  # warms the run cache
    item_id, claim = claimed(run)
    with django_assert_num_queries(5 + 2):
        assert judge_item_process(item_id=item_id, claim=claim, dispatcher=INLINE) == "done"
    item = JudgeItem.objects.get(pk=item_id)
    assert item.state == "done" and item.annotation.labels.count() == 14
    successor = JudgeItem.objects.get(state="running", run=run)
    assert successor.claim == 1 and successor.lease_until is not None
    run.refresh_from_db()
    assert run.n_done == 2 and run.tokens_in == 2000 and JudgeCache.objects.count() == 2


def test_a_relabelled_trace_gets_its_new_labels_and_a_new_revision(project, manager, llm_server, fast_retries):
    """The second answer for a trace by the same rater replaces the labels of the annotation
    (its first write is an INSERT ... ON CONFLICT DO NOTHING, the second locks and rewrites)."""
    (trace,) = make_judge_traces(project, 1)
    codes = list(project.taxonomy_version.modes.order_by("order", "code").values_list("code", flat=True))
    llm_server.push(Reply(good_answer(codes, ["1.1"])))
    drive(new_run(project, manager, llm_server))
    first = Annotation.objects.get(trace=trace)
    JudgeCache.objects.all().delete()  # so the second run asks again
    llm_server.push(Reply(good_answer(codes, ["1.2"])))
    run = drive(new_run(project, manager, llm_server))
    assert run.n_done == 1 and run.n_cached == 0
    again = Annotation.objects.get(trace=trace)
    assert again.pk == first.pk and again.revision == 2 and again.source["run"] == run.pk
    present = set(ModeLabel.objects.filter(annotation=again, decision="present").values_list("mode__code", flat=True))
    assert present == {"1.2"} and ModeLabel.objects.filter(annotation=again).count() == 14


def test_a_200_without_a_usable_body_is_transient_and_retried(project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    llm_server.push(Status(200, "not json at all"), Status(200, {"choices": []}))
    run = drive(new_run(project, manager, llm_server))
    assert run.state == "done" and run.n_done == 1 and llm_server.n_requests == 3
    assert JudgeItem.objects.get(run=run).attempts == 3


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "not JSON"),
        (b'{"choices": []}', "no choices"),
        (b'{"choices": [{"message": {"content": 7}}]}', "not text"),
        (b"[1, 2]", "no choices"),
    ],
)
def test_parse_completion_names_what_is_wrong_with_a_body(body, says):
    with pytest.raises(TransientError, match=says):
        parse_completion(body, latency_ms=1)


def test_parse_completion_reads_text_and_usage():
    body = (
        b'{"choices": [{"message": {"role": "assistant", "content": "{}"}}], "usage": {"prompt_tokens": 12,'
        b' "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 3}}}'
    )
    done = parse_completion(body, latency_ms=9)
    assert (done.text, done.tokens_in, done.tokens_out, done.tokens_reasoning, done.latency_ms) == ("{}", 12, 5, 3, 9)
    assert parse_completion(b'{"choices": [{"message": {"content": null}}]}', latency_ms=0).tokens_in == 0
