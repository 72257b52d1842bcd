"""The live-traces page of a project (managers): ingest keys (created, listed by prefix, revoked),
how to point an exporter here, and the live traces with their state. Thin."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Max
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from traces.live.assembly import live_flush
from traces.live.keys import ingest_key_create, ingest_key_revoke
from traces.live.stats import live_summary
from traces.models import IngestKey, LiveTrace
from traces.projects.selectors import project_get_for_user


@login_required
@require_http_methods(["GET", "POST"])
def live_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "key":
                key, plain = ingest_key_create(project=project, name=request.POST.get("name", ""), by=request.user)
                messages.success(request, f"Key “{key.name}” created. Copy it now; it is not shown again: {plain}")
            elif op == "revoke":
                key = get_object_or_404(IngestKey, project=project, pk=request.POST.get("id"))
                ingest_key_revoke(key=key)
                messages.success(request, f"Key “{key.name}” revoked: exporters using it now get 401.")
            elif op == "flush":
                done = len(live_flush(project=project))
                messages.success(request, f"{done} live trace(s) assembled now.")
            else:
                raise ValidationError(f"Unknown action {op!r}.")
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        return redirect("live", slug=project.slug)
    live = LiveTrace.objects.filter(project=project)
    summary = live_summary(project=project)
    endpoint = request.build_absolute_uri("/otlp")
    return render(request, "traces/live/live.html", {
        "project": project, "role": role, "nav": "projects", "tab": "settings", "endpoint": endpoint,
        "keys": project.ingest_keys.all(), "live": live.select_related("trace").order_by("-last_span_at")[:50],
        "summary": summary, "last": live.aggregate(last=Max("last_span_at"))["last"],
    })  # fmt: skip
