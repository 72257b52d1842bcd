"""Alert rules: evaluate them, record what fired, and deliver it to the project's webhooks.

A rule looks at the traces imported in its window (the last ``window_days`` days, its cohort only)
with labels from its source, as the monitoring series does (``series.py``):

* LEVEL: a code fires when its share in the window is above ``level``;
* BASELINE: a code fires when its share in the window is significantly above its share in the
  ``baseline_days`` before the window: a one-sided score test per code, the p-values adjusted
  across the codes the rule tests (Holm; ``*`` tests every mode of the working version).

Neither decides on fewer than ``min_traces`` labelled traces (in each window): the code keeps the
state it had. A code fires once when it enters the set of codes above (one ``AlertEvent``); the
event is resolved when the code comes back. Evaluation locks the rule's row (two workers never fire
one crossing twice) and runs as the rule's creator (the blind rule of the label matrix).

A delivery is a JSON POST signed with the hook's secret: ``X-Mast-Timestamp: <unix seconds>`` and
``X-Mast-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>." + body>`` (``signature_verify`` is
what a receiver does: it refuses a stale timestamp, so a captured request cannot be replayed later).
A try that fails (no answer in 10 s, an answer other than 2xx, a redirect: never followed) is
logged and the next try is due after a backoff doubling from ``MAST_WEBHOOK_BACKOFF_SECONDS``, up to
``MAST_WEBHOOK_ATTEMPTS`` tries. Every try is a ``WebhookDelivery`` row; a try whose worker died is
sent again by the sweep (receivers may see a try twice: ``X-Mast-Delivery`` is the same).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import math
import socket
import time
import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotations.analytics.stats import p_adjust
from annotations.experiments import stats
from annotations.experiments.corrected import PREFIX
from annotations.judge.secrets import SecretUnreadable, secret_decrypt
from annotations.models import AlertEvent, AlertRule, Webhook, WebhookDelivery
from annotations.monitoring.series import rows_between, shares, source_labels
from traces.jobs import task_send

logger = logging.getLogger(__name__)

DELIVER_TASK = "annotations.webhook_deliver"
TIMEOUT = 10.0
SIGNATURE_TOLERANCE = 300  # seconds a receiver accepts a timestamp (signature_verify)


def rule_check(rule: AlertRule) -> None:
    """Raises ValidationError saying what of the rule cannot work."""
    version = rule.project.taxonomy_version
    modes = set(version.modes.values_list("code", flat=True)) if version else set()
    cats = set(version.categories.values_list("code", flat=True)) if version else set()
    if rule.target == "*":
        if rule.kind != AlertRule.Kind.BASELINE:
            raise ValidationError({"target": "every mode (*) is for baseline rules, whose p-values are adjusted"})
    elif rule.target not in modes | cats:
        raise ValidationError({"target": f"{rule.target!r} is no mode or category of the working version"})
    if rule.kind == AlertRule.Kind.LEVEL and (rule.level is None or not 0 <= rule.level <= 1):
        raise ValidationError({"level": "a level rule needs a share between 0 and 1"})
    if rule.kind == AlertRule.Kind.BASELINE and rule.source.startswith(PREFIX):
        raise ValidationError({"source": "baseline rules compare plain labels; use a level rule on a corrected judge"})
    if not 0 < rule.alpha < 1 or rule.window_days < 1 or rule.baseline_days < 1:
        raise ValidationError({"alpha": "alpha between 0 and 1, windows of at least one day"})


def _one_sided(base: dict, win: dict) -> tuple[float | None, float | None]:
    """(window - baseline, one-sided p of "the window is higher")."""
    diff = stats.cohort_difference(base["k"], base["n"], win["k"], win["n"])
    if diff.value is None or diff.p_value is None:
        return diff.value, None
    p = diff.p_value / 2 if diff.value > 0 else 1 - diff.p_value / 2
    return diff.value, p


def _verdicts(rule: AlertRule, now) -> tuple[dict[str, bool | None], dict]:
    """Per tested code: above (True), not (False), no verdict (None); and the figures."""
    labels = source_labels(user=rule.created_by, project=rule.project, source=rule.source)
    start = now - timedelta(days=rule.window_days)
    modes, cats = shares(labels, rows_between(labels, rule.project, rule.cohort, start, now))
    window = {r["code"]: r for r in modes + cats}
    codes = labels.M.codes if rule.target == "*" else [rule.target]
    figures: dict = {"window": {"from": start.isoformat(), "to": now.isoformat()}, "codes": {}}
    verdicts: dict[str, bool | None] = {}
    if rule.kind == AlertRule.Kind.LEVEL:
        for code in codes:
            w = window[code]
            figures["codes"][code] = {"share": w["value"], "low": w["low"], "high": w["high"], "n": w["n"],
                                      "level": rule.level}  # fmt: skip
            enough = w["n"] >= rule.min_traces and w["value"] is not None
            verdicts[code] = (w["value"] > rule.level) if enough else None
        return verdicts, figures
    b_start = start - timedelta(days=rule.baseline_days)
    b_modes, b_cats = shares(labels, rows_between(labels, rule.project, rule.cohort, b_start, start))
    baseline = {r["code"]: r for r in b_modes + b_cats}
    figures["baseline"] = {"from": b_start.isoformat(), "to": start.isoformat()}
    tested = []
    for code in codes:
        w, b = window[code], baseline[code]
        diff, p = _one_sided(b, w)
        figures["codes"][code] = {"share": w["value"], "low": w["low"], "high": w["high"], "n": w["n"],
                                  "baseline": b["value"], "baseline_n": b["n"], "difference": diff, "p": p}  # fmt: skip
        enough = w["n"] >= rule.min_traces and b["n"] >= rule.min_traces
        verdicts[code] = None if not enough else False
        if enough and p is not None:
            tested.append(code)
    if tested:
        adjusted = p_adjust(np.array([figures["codes"][c]["p"] for c in tested]), "holm")
        for code, p_adj in zip(tested, adjusted, strict=True):
            figures["codes"][code]["p_adjusted"] = float(p_adj)
            verdicts[code] = bool(p_adj < rule.alpha and figures["codes"][code]["difference"] > 0)
    return verdicts, figures


def _message(rule: AlertRule, code: str, f: dict) -> str:
    share = f"{100 * f['share']:.1f}%" if f["share"] is not None else "?"
    if rule.kind == AlertRule.Kind.LEVEL:
        level = 100 * (rule.level or 0)
        return f"{code}: {share} of {f['n']} traces in the last {rule.window_days} days, above {level:.1f}%"
    return (
        f"{code}: {share} of {f['n']} traces in the last {rule.window_days} days against "
        f"{100 * f['baseline']:.1f}% of {f['baseline_n']} in the {rule.baseline_days} days before "
        f"(p = {f['p_adjusted']:.2g}, Holm-adjusted across {rule.target if rule.target != '*' else 'every mode'})"
    )


def _unusable(rule: AlertRule) -> str:
    """Why the rule cannot be evaluated any more (its creator is gone, the working version has no
    such code since the project moved to another), or ""."""
    if rule.created_by is None:
        return "its creator's account is gone: the rule runs as its creator (the blind rule); add it again"
    try:
        rule_check(rule)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return ""


def rule_evaluate(*, rule_id: int, now=None) -> list[AlertEvent]:
    """Evaluate one rule (module docstring); returns the events it fired. Skips a rule another
    process is evaluating now."""
    now = now or timezone.now()
    with transaction.atomic():
        rule = (
            AlertRule.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("project__taxonomy_version", "created_by")
            .filter(pk=rule_id, active=True)
            .first()
        )
        if rule is None:
            return []
        unusable = _unusable(rule)
        if unusable:  # said on the alerts page; the rule waits, as it is, until a manager changes it
            rule.last_evaluated_at, rule.last_result = now, {"error": unusable}
            rule.save(update_fields=["last_evaluated_at", "last_result"])
            return []
        verdicts, figures = _verdicts(rule, now)
        before = set(rule.firing)
        after = {c for c in before if verdicts.get(c) is None} | {c for c, v in verdicts.items() if v}
        fired = [
            AlertEvent.objects.create(rule=rule, code=code, message=_message(rule, code, figures["codes"][code]),
                                      figures={**figures["codes"][code], "window": figures["window"]})
            for code in sorted(after - before)
        ]  # fmt: skip
        AlertEvent.objects.filter(rule=rule, code__in=before - after, resolved_at__isnull=True).update(resolved_at=now)
        rule.firing, rule.last_evaluated_at, rule.last_result = sorted(after), now, figures
        rule.save(update_fields=["firing", "last_evaluated_at", "last_result"])
        hooks = list(Webhook.objects.filter(project=rule.project, active=True))
        due = [
            WebhookDelivery.objects.create(event=event, webhook=hook, attempt=1, due_at=now)
            for event in fired
            for hook in hooks
        ]
        def send_due() -> None:
            for d in due:
                task_send(DELIVER_TASK, d.pk)

        transaction.on_commit(send_due)
    return fired


def payload(event: AlertEvent) -> dict:
    rule = event.rule
    return {
        "type": "alert.fired",
        "event": event.pk,
        "project": rule.project.slug,
        "rule": {"id": rule.pk, "name": rule.name, "kind": rule.kind, "target": rule.target, "source": rule.source,
                 "cohort": rule.cohort or None},  # fmt: skip
        "code": event.code,
        "message": event.message,
        "figures": event.figures,
        "fired_at": event.fired_at.isoformat(),
    }


def sign(secret: str, timestamp: int, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_verify(secret: str, timestamp: str, body: bytes, signature: str, *, now: float | None = None) -> bool:
    """What a receiver checks: the signature of ``timestamp.body``, and a timestamp within
    SIGNATURE_TOLERANCE seconds of now (a replayed request is refused)."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((now if now is not None else time.time()) - ts) > SIGNATURE_TOLERANCE:
        return False
    return hmac.compare_digest(sign(secret, ts, body), signature or "")


def webhook_url_check(url: str) -> None:
    """Refuses a URL that is not http(s) or whose host is a link-local address (the cloud metadata
    service lives there). Checked when the hook is saved and before every try."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError({"url": "an http:// or https:// address"})
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror as exc:
        raise ValidationError({"url": f"{parts.hostname}: cannot resolve ({exc.strerror})"}) from None
    for info in infos:
        if ipaddress.ip_address(info[4][0]).is_link_local:
            raise ValidationError({"url": f"{parts.hostname} is a link-local address: refused"})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} not followed", headers, fp)


_opener = urllib.request.build_opener(_NoRedirect)


def _post(delivery: WebhookDelivery) -> tuple[int | None, str, str]:
    """(status, answer's first 500 characters, error) of one POST."""
    body = json.dumps(payload(delivery.event), sort_keys=True).encode()
    ts = int(time.time())
    try:
        secret = secret_decrypt(delivery.webhook.secret)
    except SecretUnreadable:
        return None, "", "the hook's secret cannot be decrypted with this site's keys: add the webhook again"
    # the scheme is checked by webhook_url_check before the request is opened
    request = urllib.request.Request(delivery.webhook.url, data=body, method="POST", headers={  # noqa: S310
        "Content-Type": "application/json", "User-Agent": "MAST-Studio-Webhook/1",
        "X-Mast-Event": str(delivery.event_id), "X-Mast-Delivery": f"{delivery.event_id}-{delivery.webhook_id}",
        "X-Mast-Attempt": str(delivery.attempt), "X-Mast-Timestamp": str(ts),
        "X-Mast-Signature": sign(secret, ts, body),
    })  # fmt: skip
    try:
        webhook_url_check(delivery.webhook.url)
        with _opener.open(request, timeout=TIMEOUT) as answer:
            return answer.status, answer.read(500).decode(errors="replace"), ""
    except urllib.error.HTTPError as exc:
        return exc.code, (exc.read(500).decode(errors="replace") if exc.fp else ""), f"HTTP {exc.code}: {exc.reason}"
    except ValidationError as exc:
        return None, "", " ".join(exc.messages)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, "", f"{type(exc).__name__}: {reason}"


def backoff(attempt: int) -> float:
    """Seconds before try ``attempt + 1``: MAST_WEBHOOK_BACKOFF_SECONDS doubling."""
    return float(settings.MAST_WEBHOOK_BACKOFF_SECONDS) * math.pow(2, attempt - 1)


def delivery_send(*, delivery_id: int) -> WebhookDelivery | None:
    """One try of a pending delivery (locked: one process sends it); logs it and schedules the next
    try when it failed and tries are left."""
    with transaction.atomic():
        d = (
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("webhook", "event__rule__project")
            .filter(pk=delivery_id, state=WebhookDelivery.State.PENDING)
            .first()
        )
        if d is None:
            return None
        started = time.monotonic()
        d.status_code, d.response, d.error = _post(d)
        d.sent_at, d.duration_ms = timezone.now(), int(1000 * (time.monotonic() - started))
        ok = d.status_code is not None and 200 <= d.status_code < 300
        if ok:
            d.state = WebhookDelivery.State.DELIVERED
        elif d.attempt < settings.MAST_WEBHOOK_ATTEMPTS:
            d.state = WebhookDelivery.State.RETRYING
            wait = backoff(d.attempt)
            nxt = WebhookDelivery.objects.create(
                event=d.event, webhook=d.webhook, attempt=d.attempt + 1, due_at=d.sent_at + timedelta(seconds=wait)
            )
            transaction.on_commit(lambda: task_send(DELIVER_TASK, nxt.pk, countdown=wait))
        else:
            d.state = WebhookDelivery.State.FAILED
        d.save()
    return d


def alerts_sweep(*, now=None) -> dict:
    """Evaluate the rules due (last evaluated MAST_ALERT_EVERY_SECONDS ago or never) and send the
    deliveries due whose message was lost (a worker died, the broker restarted)."""
    now = now or timezone.now()
    every = timedelta(seconds=settings.MAST_ALERT_EVERY_SECONDS)
    never_or_long_ago = Q(last_evaluated_at__isnull=True) | Q(last_evaluated_at__lt=now - every)
    due_rules = AlertRule.objects.filter(never_or_long_ago, active=True).values_list("pk", flat=True)
    fired = sum(len(rule_evaluate(rule_id=pk, now=now)) for pk in list(due_rules))
    grace = timedelta(seconds=settings.MAST_JOB_SWEEP_SECONDS)
    lost = list(
        WebhookDelivery.objects.filter(state=WebhookDelivery.State.PENDING, due_at__lt=now - grace).values_list(
            "pk", flat=True
        )[:100]
    )
    for pk in lost:
        delivery_send(delivery_id=pk)
    return {"fired": fired, "resent": len(lost)}

