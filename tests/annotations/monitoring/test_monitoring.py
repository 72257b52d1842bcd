"""Shares over time (annotations/monitoring/series.py) against statsmodels' Wilson interval, the
judge-corrected periods, the monitoring and alerts pages and API, who may see them (issue 31)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from statsmodels.stats import proportion as sm_proportion

from annotations.models import AlertEvent, AlertRule, Webhook, WebhookDelivery
from annotations.monitoring.series import failure_series
from tests.annotations.monitoring.test_alerts import labelled
from tests.annotations.releases_factories import annotate, decisions, make_trace, other_rater
from traces.models import Trace

pytestmark = pytest.mark.django_db


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def weeks(project, mast_version):
    """Three weeks ago: 10 traces, FM-1.3 on 2; this week: 12 traces, FM-1.3 on 9."""
    labelled(project, mast_version, n=10, with_mode=2, days_ago=21)
    labelled(project, mast_version, n=12, with_mode=9, days_ago=0.01)


def test_each_period_is_its_traces_share_with_the_wilson_interval(weeks, project, manager):
    series = failure_series(user=manager, project=project, bucket="week")
    assert [p["traces"] for p in series.periods] == [10, 12]
    for period, (k, n) in zip(series.periods, [(2, 10), (9, 12)], strict=True):
        fm13 = next(m for m in period["modes"] if m["code"] == "1.3")
        low, high = sm_proportion.proportion_confint(k, n, method="wilson")
        assert (fm13["k"], fm13["n"]) == (k, n)
        assert (fm13["low"], fm13["high"]) == pytest.approx((low, high))
        fc1 = next(c for c in period["categories"] if c["code"] == "1")
        assert fc1["k"] == k
    today = timezone.localdate()
    assert series.periods[-1]["start"] == (today - timedelta(days=today.weekday())).isoformat()
    days = failure_series(user=manager, project=project, bucket="day", cohort="mas_name:ChatDev")
    assert sum(p["traces"] for p in days.periods) == 22
    assert failure_series(user=manager, project=project, cohort="mas_name:Nothing").periods == []


def test_a_corrected_series_corrects_only_periods_with_a_human_sample(project, mast_version, manager):
    judge = other_rater("series-judge")
    labelled(project, mast_version, n=6, with_mode=3, days_ago=0.01)  # agreed labels this week
    recent = list(Trace.objects.filter(project=project))
    old = [make_trace(project) for _ in range(5)]
    Trace.objects.filter(pk__in=[t.pk for t in old]).update(imported_at=timezone.now() - timedelta(days=21))
    for t in recent + old:
        annotate(t, judge, mast_version, decisions(mast_version, present={"1.3"}))
    series = failure_series(user=manager, project=project, source=f"corrected:{judge.pk}")
    first, last = ({m["code"]: m for m in p["modes"]}["1.3"] for p in series.periods)
    assert first["corrected"] is False and first["n_human"] == 0 and first["value"] == 1.0  # the judge's own
    assert last["corrected"] is True and last["n_human"] == 6
    assert last["value"] == pytest.approx(0.5)  # every judged trace has agreed labels: the humans' mean


def test_the_pages_show_the_chart_and_table_and_alerts_are_for_managers(client, weeks, project, manager, annotator):
    client.force_login(manager)
    page = client.get(reverse("annotations:monitoring", args=[project.slug]), {"show": "1.3"}).content.decode()
    assert 'data-testid="monitoring-chart"' in page and "<svg" in page and "75.0%" in page  # 9/12
    assert client.get(reverse("annotations:alerts", args=[project.slug])).status_code == 200
    response = client.post(reverse("annotations:alerts", args=[project.slug]), {
        "op": "rule", "name": "1.3 up", "kind": "level", "target": "1.3", "level": "50", "window_days": "7",
        "min_traces": "5", "source": "agreed"}, follow=True)  # fmt: skip
    assert "Rule “1.3 up” added" in response.content.decode()
    assert AlertRule.objects.get().level == pytest.approx(0.5)
    wrong = {"op": "rule", "name": "x", "kind": "level", "target": "9.9", "level": "50", "source": "agreed"}
    bad = client.post(reverse("annotations:alerts", args=[project.slug]), wrong, follow=True)
    assert "no mode or category" in bad.content.decode() and AlertRule.objects.count() == 1
    client.post(reverse("annotations:alerts", args=[project.slug]), {"op": "evaluate"})
    assert AlertEvent.objects.get().code == "1.3"
    page = client.get(reverse("annotations:monitoring", args=[project.slug]), {"show": "1.3"}).content.decode()
    assert "alert 1.3" in page  # the chart marks it

    client.force_login(annotator)
    assert client.get(reverse("annotations:alerts", args=[project.slug])).status_code == 403
    page = client.get(reverse("annotations:monitoring", args=[project.slug])).content.decode()
    assert "alert 1.3" not in page and "1.3 up" not in page


def test_the_api_series_rules_hooks_and_events(weeks, project, manager, annotator):
    api = _api(manager)
    base = f"/api/projects/{project.slug}"
    data = api.get(f"{base}/monitoring/", {"bucket": "week"}).json()
    assert [p["traces"] for p in data["periods"]] == [10, 12] and data["corrected"] is False
    assert api.get(f"{base}/monitoring/", {"bucket": "year"}).status_code == 400
    assert api.get(f"{base}/monitoring/", {"rater": "999999"}).status_code == 400

    rule = api.post(f"{base}/alert-rules/", {"name": "any up", "kind": "baseline", "target": "*", "window_days": 7,
                                             "baseline_days": 28, "min_traces": 5}, format="json")  # fmt: skip
    assert rule.status_code == 201, rule.json()
    everything = {"name": "x", "kind": "level", "target": "*", "level": 0.2}
    refused = api.post(f"{base}/alert-rules/", everything, format="json")
    assert refused.status_code == 400 and "every mode" in str(refused.json())
    assert [r["name"] for r in api.get(f"{base}/alert-rules/").json()] == ["any up"]

    hook = api.post(f"{base}/webhooks/", {"url": "http://127.0.0.1:9/hook"}, format="json").json()
    assert hook["secret"].startswith("whsec_")
    listed = api.get(f"{base}/webhooks/").json()
    assert "secret" not in listed[0] and listed[0]["secret_prefix"].endswith("…")
    assert hook["secret"] not in str(listed)
    stored = Webhook.objects.get()
    assert stored.secret != hook["secret"] and hook["secret"] not in stored.secret  # encrypted at rest
    assert hook["secret"].startswith(stored.secret_prefix.rstrip("…"))

    from annotations.monitoring.alerts import rule_evaluate

    assert [e.code for e in rule_evaluate(rule_id=rule.json()["id"])] == ["1.3"]
    events = api.get(f"{base}/alert-events/").json()
    assert events[0]["code"] == "1.3" and events[0]["deliveries"][0]["attempt"] == 1
    assert hook["secret"] not in str(events)
    assert api.delete(f"{base}/webhooks/{hook['id']}/").status_code == 204
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()

    viewer = _api(annotator)
    assert viewer.get(f"{base}/alert-rules/").status_code in (403, 404)
    assert viewer.get(f"{base}/webhooks/").status_code in (403, 404)
    assert viewer.get(f"{base}/alert-events/").status_code in (403, 404)
    assert viewer.get(f"{base}/monitoring/").status_code == 200
