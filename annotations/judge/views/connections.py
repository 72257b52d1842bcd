"""Pages of the judge's provider connections (managers): list + new, edit, test, delete."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotations.judge.connections import (
    PRESETS,
    connection_delete,
    connection_list,
    connection_save,
    connection_test,
)
from annotations.judge.providers.base import adaptations_describe
from annotations.models import ProviderConnection
from traces.projects.selectors import project_get_for_user


class ConnectionForm(forms.Form):
    name = forms.CharField(max_length=100)
    preset = forms.ChoiceField(choices=ProviderConnection.Preset.choices, initial="custom", label="Kind of server")
    base_url = forms.CharField(
        label="Base URL", max_length=500, help_text="Where /chat/completions lives, e.g. http://127.0.0.1:8000/v1"
    )
    models = forms.CharField(
        required=False, label="Models", help_text="Comma-separated; the run form offers these. The first is tested."
    )
    api_key = forms.CharField(
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted; never shown again. Leave empty to keep the stored key.",
    )
    key_env = forms.CharField(
        required=False,
        label="…or environment variable",
        help_text="The NAME of a worker variable listed in MAST_JUDGE_API_KEYS, instead of a stored key.",
    )
    clear_key = forms.BooleanField(required=False, label="Forget the stored key")
    price_in = forms.DecimalField(min_value=0, decimal_places=4, initial=0, label="Price per 1M input tokens")
    price_out = forms.DecimalField(min_value=0, decimal_places=4, initial=0, label="Price per 1M output tokens")


def _presets_json() -> str:
    return json.dumps({p.key: {"base_url": p.base_url, "models": list(p.models)} for p in PRESETS})


def _project(request, slug):
    return project_get_for_user(user=request.user, slug=slug, capability="manage")


def _conn_or_404(project, conn_id) -> ProviderConnection:
    conn = connection_list(project=project).filter(pk=conn_id).first()
    if conn is None:
        raise Http404("No such connection.")
    return conn


def _save(request, project, form, connection=None):
    data = form.cleaned_data
    try:
        return connection_save(
            project=project,
            by=request.user,
            name=data["name"],
            preset=data["preset"],
            base_url=data["base_url"],
            models=data["models"],
            api_key=data["api_key"] or None,
            key_env=data["key_env"],
            clear_key=data["clear_key"],
            price_in=data["price_in"],
            price_out=data["price_out"],
            connection=connection,
        )
    except ValidationError as exc:
        for field, errs in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errs)
        return None


@login_required
@require_http_methods(["GET", "POST"])
def connection_list_page(request, slug):
    project, role = _project(request, slug)
    form = ConnectionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        conn = _save(request, project, form)
        if conn is not None:
            messages.success(request, f"Connection “{conn.name}” saved. Test it before a run.")
            return redirect("annotations:judge_connection", slug=project.slug, conn_id=conn.pk)
    return render(
        request,
        "annotations/judge/connections.html",
        {
            "project": project,
            "role": role,
            "connections": connection_list(project=project),
            "form": form,
            "presets": PRESETS,
            "presets_json": _presets_json(),
            "nav": "projects",
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def connection_page(request, slug, conn_id):
    project, role = _project(request, slug)
    conn = _conn_or_404(project, conn_id)
    initial = {
        "name": conn.name,
        "preset": conn.preset,
        "base_url": conn.base_url,
        "models": ", ".join(conn.models_list),
        "key_env": conn.key_env,
        "price_in": conn.price_in,
        "price_out": conn.price_out,
    }
    form = ConnectionForm(request.POST or None, initial=initial)
    probe = None
    if request.method == "POST" and request.POST.get("action") == "test":
        form = ConnectionForm(initial=initial)
        probe = connection_test(connection=conn, model=request.POST.get("model", ""))
        conn.refresh_from_db(fields=["adaptations"])
    elif request.method == "POST" and form.is_valid():
        saved = _save(request, project, form, connection=conn)
        if saved is not None:
            messages.success(request, f"Connection “{saved.name}” saved.")
            return redirect("annotations:judge_connection", slug=project.slug, conn_id=saved.pk)
    return render(
        request,
        "annotations/judge/connection.html",
        {
            "project": project,
            "role": role,
            "conn": conn,
            "form": form,
            "probe": probe,
            "presets": PRESETS,
            "presets_json": _presets_json(),
            "n_runs": conn.runs.count(),
            "adaptations": [(m, adaptations_describe(params)) for m, params in sorted(conn.adaptations.items())],
            "nav": "projects",
        },
    )


@login_required
@require_POST
def connection_delete_page(request, slug, conn_id):
    project, role = _project(request, slug)
    conn = _conn_or_404(project, conn_id)
    try:
        connection_delete(connection=conn)
    except ValidationError as exc:
        messages.error(request, f"Not deleted: {'; '.join(exc.messages)}.")
        return redirect("annotations:judge_connection", slug=project.slug, conn_id=conn.pk)
    messages.success(request, f"Connection “{conn.name}” deleted.")
    return redirect("annotations:judge_connections", slug=project.slug)
