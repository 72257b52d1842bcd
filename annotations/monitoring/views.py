"""The monitoring page (shares over time, as a chart and a table) and the alerts page (rules,
webhooks, what fired and every delivery try; managers). Thin."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods

from annotations.analytics.charts import line_chart
from annotations.analytics.selectors import dashboard_filter_choices
from annotations.experiments.selectors import experiment_sources
from annotations.experiments.views import chosen_source
from annotations.models import AlertEvent, AlertRule, Webhook
from annotations.monitoring.alerts import rule_evaluate
from annotations.monitoring.series import failure_series
from annotations.monitoring.services import (
    RULE_FIELDS,
    alert_rule_create,
    alert_rule_set_active,
    webhook_create,
    webhook_delete,
)
from traces.projects.selectors import project_get_for_user


def _cell(s: dict) -> str:
    if s["value"] is None:
        return "—"
    text = f"{100 * s['value']:.1f}%"
    if s["low"] is not None:
        text += f" [{100 * s['low']:.0f}–{100 * s['high']:.0f}]"
    if s.get("k") is not None:
        text += f" · {s['k']}/{s['n']}"
    elif s.get("corrected"):
        text += f" · {s['n']} judged, {s['n_human']} agreed"
    return text


def _period_of(when, bucket: str) -> str:
    day = timezone.localtime(when).date()
    return (day - timedelta(days=day.weekday()) if bucket == "week" else day).isoformat()


@login_required
@require_GET
def monitoring_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    sources, source = chosen_source(request, project)
    bucket = "day" if request.GET.get("bucket") == "day" else "week"
    cohort, show = request.GET.get("cohort", "").strip(), request.GET.get("show", "categories")
    series, error = None, ""
    try:
        series = failure_series(user=request.user, project=project, source=source, cohort=cohort, bucket=bucket)
    except ValidationError as exc:
        error = " ".join(exc.messages)
    chart, columns, rows, events = "", [], [], []
    if series is not None:
        by_mode = show in series.codes
        level = "modes" if by_mode else "categories"
        codes = [show] if by_mode else series.categories
        names = series.names if by_mode else series.category_names
        columns = [f"{c} {names.get(c, '')}" for c in codes]
        index = [(series.codes if by_mode else series.categories).index(c) for c in codes]
        lines = [(col, [(p[level][i]["value"], p[level][i]["low"], p[level][i]["high"]) for p in series.periods])
                 for col, i in zip(columns, index, strict=True)]  # fmt: skip
        if role == "manager":
            events = list(AlertEvent.objects.filter(rule__project=project, code__in=codes).select_related("rule")[:50])
        marks = [(_period_of(e.fired_at, bucket), f"alert {e.code}") for e in events]
        periods = [p["start"] for p in series.periods]
        chart = mark_safe(line_chart(periods, lines, title="Share of labelled traces, with 95% intervals",  # noqa: S308
                                     y_label=f"per {bucket} (imported)", marks=marks))  # fmt: skip  (our SVG, escaped)
        rows = [{"start": p["start"], "traces": p["traces"], "cells": [_cell(p[level][i]) for i in index]}
                for p in series.periods]  # fmt: skip
    choices = dashboard_filter_choices(project=project)
    return render(request, "annotations/monitoring/monitoring.html", {
        "project": project, "role": role, "nav": "projects", "series": series, "error": error, "chart": chart,
        "columns": columns, "rows": rows, "events": events, "sources": sources, "source": source, "bucket": bucket,
        "cohort": cohort, "show": show, "mode_codes": series.codes if series else [],
        "suggestions": [f"{f}:{v}" for f, values in choices.items() for v in values],
    })  # fmt: skip


def _manager(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    if role != "manager":
        raise PermissionDenied("Alerts are managed by the project's managers.")
    return project, role


def _post(request, project) -> None:
    op = request.POST.get("op")
    if op == "rule":
        data: dict = {k: request.POST.get(k) or None for k in RULE_FIELDS}
        for k in ("window_days", "baseline_days", "min_traces"):
            data[k] = int(data[k]) if data[k] else None
        for k, scale in (("level", 100), ("alpha", 1)):  # the page asks for the level in percent
            data[k] = float(data[k]) / scale if data[k] else None
        rule = alert_rule_create(project=project, by=request.user, data={**data, "cohort": data["cohort"] or ""})
        messages.success(request, f"Rule “{rule.name}” added; it is evaluated every few minutes.")
    elif op == "hook":
        _, secret = webhook_create(project=project, by=request.user, url=request.POST.get("url", "").strip())
        messages.success(request, f"Webhook added. Its signing secret, shown this once: {secret}")
    elif op == "hook_delete":
        webhook_delete(hook=get_object_or_404(Webhook, project=project, pk=request.POST.get("id")))
        messages.success(request, "Webhook deleted.")
    elif op in ("rule_pause", "rule_resume"):
        rule = get_object_or_404(AlertRule, project=project, pk=request.POST.get("id"))
        alert_rule_set_active(rule=rule, active=op == "rule_resume")
    elif op == "evaluate":
        fired = sum(len(rule_evaluate(rule_id=r.pk)) for r in project.alert_rules.filter(active=True))
        messages.success(request, f"Rules evaluated now: {fired} fired.")
    else:
        raise ValidationError(f"Unknown action {op!r}.")


@login_required
@require_http_methods(["GET", "POST"])
def alerts_page(request, slug):
    project, role = _manager(request, slug)
    if request.method == "POST":
        try:
            _post(request, project)
        except (ValidationError, ValueError) as exc:
            errors = exc.message_dict if isinstance(exc, ValidationError) and hasattr(exc, "error_dict") else None
            text = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()) if errors else " ".join(
                getattr(exc, "messages", [str(exc)]))  # fmt: skip
            messages.error(request, text)
        return redirect("annotations:alerts", slug=project.slug)
    events = AlertEvent.objects.filter(rule__project=project).select_related("rule").prefetch_related(
        "deliveries__webhook")[:50]  # fmt: skip
    version = project.taxonomy_version
    sources = experiment_sources(user=request.user, project=project)
    rules = list(project.alert_rules.all())
    for rule in rules:
        rule.source_label = dict(sources).get(rule.source, rule.source)
    return render(request, "annotations/monitoring/alerts.html", {
        "project": project, "role": role, "nav": "projects", "rules": rules, "hooks": project.webhooks.all(),
        "events": events, "sources": sources, "modes": version.modes.all() if version else [],
        "categories": version.categories.all() if version else [],
    })  # fmt: skip
