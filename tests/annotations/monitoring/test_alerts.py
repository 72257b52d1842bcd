"""Alert rules (annotations/monitoring/alerts.py): a rule fires once per crossing, a baseline rule's
p-values are statsmodels' one-sided score tests Holm-adjusted across the modes, each delivery to a
local HTTP receiver is signed (the signature verifies, a stale or altered one does not), a failing
receiver is retried with backoff and every try is logged; in a real Celery worker too (issue 31)."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from statsmodels.stats import multitest as sm_multitest
from statsmodels.stats import proportion as sm_proportion

from annotations.judge.secrets import secret_encrypt
from annotations.models import AlertEvent, AlertRule, Webhook, WebhookDelivery
from annotations.monitoring.alerts import (
    delivery_send,
    rule_check,
    rule_evaluate,
    signature_verify,
    webhook_url_check,
)
from tests.annotations.monitoring.receiver import Receiver
from tests.annotations.releases_factories import closed_round, make_trace
from tests.conftest_paths import subprocess_database_url
from tests.processes import WorkerProcess
from traces.models import Trace

SECRET = "whsec_test_0123456789abcdef"


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def labelled(project, version, *, n: int, with_mode: int, days_ago: float, code: str = "1.3") -> None:
    """``n`` traces imported ``days_ago`` days ago, agreed labels: ``code`` on the first ``with_mode``."""
    traces = {make_trace(project): ({code} if i < with_mode else set()) for i in range(n)}
    closed_round(project, version, traces)
    Trace.objects.filter(pk__in=[t.pk for t in traces]).update(imported_at=timezone.now() - timedelta(days=days_ago))


def _rule(project, manager, **kw) -> AlertRule:
    fields = {"name": "FM-1.3 too common", "kind": "level", "target": "1.3", "level": 0.3, "window_days": 7,
              "min_traces": 5, **kw}  # fmt: skip
    rule = AlertRule(project=project, created_by=manager, **fields)
    rule_check(rule)
    rule.save()
    return rule


def _drive(max_tries: int = 10) -> list[WebhookDelivery]:
    """Send the due tries in this process until none is pending (the worker's job, inline)."""
    for _ in range(max_tries):
        pending = list(WebhookDelivery.objects.filter(state="pending").order_by("id"))
        if not pending:
            break
        for d in pending:
            delivery_send(delivery_id=d.pk)
    return list(WebhookDelivery.objects.order_by("attempt"))


@pytest.mark.django_db
def test_a_level_rule_fires_once_per_crossing_and_each_try_is_logged(project, mast_version, manager, receiver):
    labelled(project, mast_version, n=20, with_mode=10, days_ago=1)  # 50% this week
    labelled(project, mast_version, n=20, with_mode=20, days_ago=20)  # outside the window: not counted
    Webhook.objects.create(project=project, url=receiver.url, secret=secret_encrypt(SECRET))
    rule = _rule(project, manager)
    receiver.statuses = [500, 503]  # the receiver fails twice, then takes it

    fired = rule_evaluate(rule_id=rule.pk)
    assert [e.code for e in fired] == ["1.3"]
    assert fired[0].figures["share"] == pytest.approx(0.5) and fired[0].figures["n"] == 20
    assert "50.0% of 20 traces in the last 7 days, above 30.0%" in fired[0].message
    assert rule_evaluate(rule_id=rule.pk) == []  # still above: no second event

    tries = _drive()
    assert [(t.attempt, t.state, t.status_code) for t in tries] == [
        (1, "retrying", 500), (2, "retrying", 503), (3, "delivered", 200)]  # fmt: skip
    assert tries[0].response == "receiver is down" and tries[2].response == "ok"
    assert tries[1].due_at - tries[0].sent_at == pytest.approx(timedelta(seconds=30), abs=timedelta(seconds=1))
    assert tries[2].due_at - tries[1].sent_at == pytest.approx(timedelta(seconds=60), abs=timedelta(seconds=1))
    assert len(receiver.got) == 3
    for got in receiver.got:
        assert signature_verify(SECRET, got.headers["X-Mast-Timestamp"], got.body, got.headers["X-Mast-Signature"])
    got = receiver.got[-1]
    body = json.loads(got.body)
    assert body["type"] == "alert.fired" and body["code"] == "1.3" and body["rule"]["name"] == "FM-1.3 too common"
    assert got.headers["X-Mast-Attempt"] == "3" and got.headers["X-Mast-Delivery"] == receiver.got[0].headers[
        "X-Mast-Delivery"]  # fmt: skip
    # a replayed request (an old timestamp), another secret or an altered body does not verify
    ts, sig = got.headers["X-Mast-Timestamp"], got.headers["X-Mast-Signature"]
    assert not signature_verify(SECRET, ts, got.body, sig, now=int(ts) + 301)
    assert not signature_verify("whsec_other", ts, got.body, sig)
    assert not signature_verify(SECRET, ts, got.body.replace(b"1.3", b"1.4"), sig)

    # back under the level: resolved; above again: a second crossing, a second event
    AlertRule.objects.filter(pk=rule.pk).update(level=0.6)
    assert rule_evaluate(rule_id=rule.pk) == []
    assert AlertEvent.objects.get().resolved_at is not None
    AlertRule.objects.filter(pk=rule.pk).update(level=0.3)
    assert len(rule_evaluate(rule_id=rule.pk)) == 1
    assert AlertEvent.objects.count() == 2


@pytest.mark.django_db
def test_a_receiver_that_never_answers_is_given_up_after_the_last_try(project, mast_version, manager, settings):
    settings.MAST_WEBHOOK_ATTEMPTS = 2
    labelled(project, mast_version, n=10, with_mode=10, days_ago=1)
    nowhere = "http://127.0.0.1:9/nothing-listens"
    Webhook.objects.create(project=project, url=nowhere, secret=secret_encrypt(SECRET))
    rule_evaluate(rule_id=_rule(project, manager).pk)
    tries = _drive()
    assert [(t.attempt, t.state) for t in tries] == [(1, "retrying"), (2, "failed")]
    assert "ConnectionRefusedError" in tries[0].error or "Connection refused" in tries[0].error


@pytest.mark.django_db
def test_too_few_traces_decide_nothing(project, mast_version, manager):
    labelled(project, mast_version, n=4, with_mode=4, days_ago=1)
    rule = _rule(project, manager)
    assert rule_evaluate(rule_id=rule.pk) == []
    rule.refresh_from_db()
    assert rule.firing == [] and rule.last_result["codes"]["1.3"]["n"] == 4


@pytest.mark.django_db
def test_a_baseline_rule_tests_every_mode_one_sided_with_holm(project, mast_version, manager):
    labelled(project, mast_version, n=40, with_mode=4, days_ago=20)  # baseline: 10%
    labelled(project, mast_version, n=20, with_mode=12, days_ago=2)  # this week: 60%
    rule = _rule(project, manager, kind="baseline", target="*", level=None, baseline_days=28)
    fired = rule_evaluate(rule_id=rule.pk)
    assert [e.code for e in fired] == ["1.3"]
    rule.refresh_from_db()
    figures = rule.last_result["codes"]
    _, p = sm_proportion.test_proportions_2indep(12, 20, 4, 40, method="score", alternative="larger")
    assert figures["1.3"]["p"] == pytest.approx(p)
    # only 1.3 has a test (the others were never seen): Holm over one p is the p itself
    tested = [c for c, f in figures.items() if "p_adjusted" in f]
    assert tested == ["1.3"]
    assert figures["1.3"]["p_adjusted"] == pytest.approx(sm_multitest.multipletests([p], method="holm")[1][0])


def test_rules_and_hooks_it_cannot_use_are_refused_saying_why(project, mast_version, db):
    with pytest.raises(ValidationError, match="no mode or category"):
        rule_check(AlertRule(project=project, kind="level", target="9.9", level=0.2))
    with pytest.raises(ValidationError, match="every mode"):
        rule_check(AlertRule(project=project, kind="level", target="*", level=0.2))
    with pytest.raises(ValidationError, match="between 0 and 1"):
        rule_check(AlertRule(project=project, kind="level", target="1.3", level=30))
    with pytest.raises(ValidationError, match="link-local"):
        webhook_url_check("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(ValidationError, match="http"):
        webhook_url_check("file:///etc/passwd")


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_evaluates_the_rule_and_retries_the_receiver(
    project, mast_version, manager, receiver, settings
):
    labelled(project, mast_version, n=20, with_mode=10, days_ago=1)
    Webhook.objects.create(project=project, url=receiver.url, secret=secret_encrypt(SECRET))
    rule = _rule(project, manager)
    receiver.statuses = [500]
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    env.update(MAST_JOB_SWEEP_SECONDS="1", MAST_ALERT_EVERY_SECONDS="1", MAST_WEBHOOK_BACKOFF_SECONDS="0.5")
    worker = WorkerProcess(env)
    worker.purge()
    worker.start()
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not WebhookDelivery.objects.filter(state="delivered").exists():
            time.sleep(0.3)
        time.sleep(3)  # a few more sweeps: the rule is evaluated again, nothing fires twice
    finally:
        worker.stop()
    tries = list(WebhookDelivery.objects.order_by("attempt").values_list("attempt", "state", "status_code"))
    assert tries == [(1, "retrying", 500), (2, "delivered", 200)]
    assert AlertEvent.objects.filter(rule=rule).count() == 1 and len(receiver.got) == 2
    rule.refresh_from_db()
    assert rule.firing == ["1.3"] and rule.last_evaluated_at > timezone.now() - timedelta(seconds=10)


@pytest.mark.django_db
def test_a_rule_that_cannot_run_any_more_says_why_and_fires_nothing(project, mast_version, manager):
    labelled(project, mast_version, n=10, with_mode=10, days_ago=1)
    rule = _rule(project, manager)
    AlertRule.objects.filter(pk=rule.pk).update(target="1.9")  # the working version has no 1.9 (any more)
    assert rule_evaluate(rule_id=rule.pk) == []
    rule.refresh_from_db()
    assert "no mode or category" in rule.last_result["error"] and rule.firing == []
    AlertRule.objects.filter(pk=rule.pk).update(target="1.3", created_by=None)
    assert rule_evaluate(rule_id=rule.pk) == []
    rule.refresh_from_db()
    assert "creator" in rule.last_result["error"] and not AlertEvent.objects.exists()
