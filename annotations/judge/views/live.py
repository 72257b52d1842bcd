"""The live judge policy page (managers): set it, see today's spend, what it judged, skipped and
sent to the human sample. Thin."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotations.judge.live import live_policy_set, live_policy_summary
from annotations.models import LivePolicy, ProviderConnection, Round
from traces.projects.selectors import project_get_for_user


@login_required
@require_http_methods(["GET", "POST"])
def live_policy_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    if request.method == "POST":
        post = request.POST
        data = {k: post.get(k) or None for k in ("connection", "model", "human_round", "daily_tokens", "daily_cost")}
        try:
            data.update(active=post.get("active") == "on", judge_share=float(post.get("judge_share") or -1) / 100,
                        human_share=float(post.get("human_share") or -1) / 100)  # fmt: skip
            data["daily_tokens"] = int(data["daily_tokens"]) if data["daily_tokens"] else None
            live_policy_set(project=project, by=request.user, data=data)
        except (ValidationError, ValueError) as exc:
            messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        else:
            messages.success(request, "Live policy saved: it applies to the live traces that arrive from now on.")
        return redirect("annotations:judge_live", slug=project.slug)
    return render(request, "annotations/judge/live.html", {
        "project": project, "role": role, "nav": "projects",
        "policy": LivePolicy.objects.filter(project=project).first(),
        "summary": live_policy_summary(project=project),
        "connections": ProviderConnection.objects.filter(project=project).order_by("name"),
        "rounds": Round.objects.filter(project=project, state=Round.State.OPEN).order_by("name"),
    })  # fmt: skip
