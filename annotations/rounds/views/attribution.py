"""HTML for attribution disagreements: the cards on the disagreements page and adjudicating one
(htmx re-renders the card; a plain form post goes back to the page)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations.models import Round
from annotations.rounds.attribution.consensus import attribution_adjudicate, round_attribution_disagreements
from annotations.rounds.selectors import round_get, round_require_report_access, round_require_trace_shown
from annotations.rounds.views.rounds import _errors
from traces.projects.selectors import project_get_for_user


def attribution_cards_context(*, rnd: Round, user, access, status: str) -> dict:
    """What ``rounds/_attribution_cards.html`` needs (used by the disagreements page)."""
    return {
        "attribution_items": round_attribution_disagreements(round=rnd, user=user, status=status),
        "can_adjudicate": access.can_manage and rnd.state == Round.State.REVIEW,
    }


def _parse(request: HttpRequest, item) -> dict:
    """The decision from the form: one rater's answer (``choice=rater:<n>``) or the fields typed in."""
    post = request.POST
    choice = post.get("choice", "other")
    modes = post.getlist("modes")
    if choice.startswith("rater:") and item is not None:
        try:
            rater = item.raters[int(choice.split(":", 1)[1])]
        except (ValueError, IndexError):
            raise ValidationError("Choose one of the raters' answers, or type the decisive step.") from None
        if rater.value is None:
            raise ValidationError(f"{rater.username} did not attribute this trace (or it is hidden from you).")
        v = rater.value
        return {
            "step": v.decisive_step,
            "no_single_step": v.no_single_step,
            "agent": v.agent,
            "modes": modes or list(v.modes),
            "reason": post.get("reason", "") or v.reason,
        }
    if post.get("no_single_step"):
        return {"step": None, "no_single_step": True, "agent": post.get("agent", ""), "modes": modes}
    raw = post.get("step", "").strip()
    if not raw.isdigit():
        raise ValidationError(f"The decisive step must be a step number, not {raw[:20]!r}.")
    return {"step": int(raw), "no_single_step": False, "agent": post.get("agent", ""), "modes": modes}


@login_required
@require_POST
def attribution_adjudicate_view(request: HttpRequest, slug: str, pk: int, trace_id: int) -> HttpResponse:
    project, _ = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    round_require_trace_shown(user=request.user, round=rnd, trace_id=trace_id)
    items = round_attribution_disagreements(round=rnd, user=request.user, trace_id=trace_id)
    item = items[0] if items else None
    error = ""
    try:
        fields = _parse(request, item)
        fields.setdefault("reason", request.POST.get("reason", ""))
        attribution_adjudicate(round=rnd, trace=trace_id, note=request.POST.get("note", ""), by=request.user, **fields)
    except ValidationError as exc:
        error = _errors(exc)
    if not request.headers.get("HX-Request"):
        if error:
            messages.error(request, error)
        url = reverse("annotations:round_disagreements", kwargs={"slug": slug, "pk": pk})
        return redirect(f"{url}#attribution")
    items = round_attribution_disagreements(round=rnd, user=request.user, trace_id=trace_id)
    if not items:
        return HttpResponse("This trace has no attribution disagreement.", status=404)
    return render(
        request,
        "annotations/rounds/_attribution_card.html",
        {
            "project": project,
            "round": rnd,
            "a": items[0],
            "error": error,
            "can_adjudicate": access.can_manage and rnd.state == Round.State.REVIEW,
        },
    )
