"""Create and change alert rules and webhooks (the pages and the API call these)."""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.db import transaction

from annotations.experiments.selectors import Cohort, experiment_sources
from annotations.judge.secrets import secret_encrypt
from annotations.models import AlertRule, Webhook
from annotations.monitoring.alerts import rule_check, webhook_url_check
from traces.models import Project

RULE_FIELDS = ("name", "kind", "target", "level", "window_days", "baseline_days", "alpha", "min_traces", "source",
               "cohort")  # fmt: skip


def alert_rule_create(*, project: Project, by, data: dict) -> AlertRule:
    """A rule from ``data`` (RULE_FIELDS); raises ValidationError saying which field is wrong."""
    rule = AlertRule(project=project, created_by=by, **{k: data[k] for k in RULE_FIELDS if data.get(k) is not None})
    if rule.kind == AlertRule.Kind.BASELINE:
        rule.level = None
    if not rule.name.strip():
        raise ValidationError({"name": "give the rule a name"})
    rule_check(rule)
    if rule.source not in {value for value, _ in experiment_sources(user=by, project=project)}:
        raise ValidationError({"source": f"no label source {rule.source[:40]!r} you may see"})
    if rule.cohort:
        Cohort.parse(rule.cohort, which="cohort")
    rule.full_clean()
    rule.save()
    return rule


def alert_rule_set_active(*, rule: AlertRule, active: bool) -> AlertRule:
    rule.active = active
    rule.save(update_fields=["active"])
    return rule


def webhook_create(*, project: Project, by, url: str) -> tuple[Webhook, str]:
    """A hook with a new secret, stored encrypted; returns it with the plain secret, which the
    caller shows once."""
    webhook_url_check(url)
    plain = f"whsec_{secrets.token_urlsafe(32)}"
    hook = Webhook(project=project, url=url, secret=secret_encrypt(plain), secret_prefix=plain[:10] + "…",
                   created_by=by)  # fmt: skip
    hook.full_clean()
    hook.save()
    return hook, plain


@transaction.atomic
def webhook_delete(*, hook: Webhook) -> None:
    """Deletes the hook and its delivery log."""
    hook.delete()
