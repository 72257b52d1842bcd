"""HTML pages of a round's disagreements: the paginated list, the htmx actions on one unit
(adjudicate, comment) that re-render its card, and "revise this definition" beside the disputed
evidence. Views parse input, call one service or selector, render.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotations.labels.visibility import round_withheld_trace_ids
from annotations.models import Round
from annotations.rounds.disagreements import disagreement_evidence_steps, round_disagreements
from annotations.rounds.selectors import (
    round_get,
    round_modes,
    round_require_report_access,
    round_require_trace_shown,
)
from annotations.rounds.services import adjudication_record, disagreement_comment_add, round_revise_definition
from annotations.rounds.views.attribution import attribution_cards_context
from annotations.rounds.views.rounds import _errors
from taxonomy.models import FailureMode
from traces.projects.selectors import project_get_for_user


def _trace_url(slug: str, trace_id: int, step: int | None) -> str:
    try:
        url = reverse("trace_detail", kwargs={"slug": slug, "pk": trace_id})
    except NoReverseMatch:
        return ""
    return f"{url}#step-{step}" if step is not None else url


def _decorate(items, slug: str) -> None:
    for d in items:
        d.trace_url = _trace_url(slug, d.trace.pk, d.first_step)
        for lab in d.labels:
            lab.steps = [
                {"step": ev["step"], "url": _trace_url(slug, d.trace.pk, ev["step"])}
                for ev in lab.evidence
                if isinstance(ev, dict) and isinstance(ev.get("step"), int)
            ]
            lab.lines = [ev["lines"] for ev in lab.evidence if isinstance(ev, dict) and ev.get("lines")]


@login_required
def round_disagreements_page(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    status = request.GET.get("status", "open" if rnd.state == Round.State.REVIEW else "all")
    if status not in ("all", "open", "decided"):
        status = "all"
    mode = request.GET.get("mode") or None
    items = round_disagreements(round=rnd, user=request.user, mode_code=mode, status=status)
    page = Paginator(items, 20).get_page(request.GET.get("page"))
    _decorate(page.object_list, slug)
    return render(
        request,
        "annotations/rounds/disagreements.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "access": access,
            "page": page,
            "status": status,
            "mode": mode,
            "modes": round_modes(version=rnd.taxonomy_version),
            "n_open": items.n_open if rnd.state == Round.State.REVIEW else 0,
            "n_withheld": len(round_withheld_trace_ids(user=request.user, round=rnd)),
            "can_adjudicate": access.can_manage and rnd.state == Round.State.REVIEW,
            "can_comment": rnd.state in (Round.State.REVIEW, Round.State.CLOSED)
            and (access.can_manage or access.is_annotator),
            "nav": "projects",
            **(attribution_cards_context(rnd=rnd, user=request.user, access=access, status=status) if not mode else {}),
        },
    )


def _one_disagreement(request: HttpRequest, rnd: Round, trace_id: int, mode_code: str):
    """The unit's disagreement (or None) and how many of the round's are still open."""
    found = round_disagreements(round=rnd, user=request.user, mode_code=mode_code, trace_id=trace_id)
    items = list(found)
    _decorate(items, rnd.project.slug)
    return (items[0] if items else None), found.n_open


def _render_card(request: HttpRequest, rnd: Round, access, trace_id: int, mode_code: str, error: str = ""):
    """The re-rendered card, and the page's "N still to decide" counter swapped out of band, so the
    counter follows every decision without a reload."""
    d, n_open = _one_disagreement(request, rnd, trace_id, mode_code)
    if d is None:
        return HttpResponse("This unit is not a disagreement.", status=404)
    return render(
        request,
        "annotations/rounds/_disagreement_card.html",
        {
            "project": rnd.project,
            "round": rnd,
            "d": d,
            "error": error,
            "can_adjudicate": access.can_manage and rnd.state == Round.State.REVIEW,
            "can_comment": rnd.state in (Round.State.REVIEW, Round.State.CLOSED)
            and (access.can_manage or access.is_annotator),
            "access": access,
            "n_open": n_open,
            "count_oob": rnd.state == Round.State.REVIEW,
        },
    )


def _after_action(request: HttpRequest, rnd: Round, access, trace_id: int, mode_code: str, error: str):
    """htmx swaps in the re-rendered card; a plain form post goes back to the list."""
    if not request.headers.get("HX-Request"):
        if error:
            messages.error(request, error)
        return redirect(reverse("annotations:round_disagreements", kwargs={"slug": rnd.project.slug, "pk": rnd.pk}))
    return _render_card(request, rnd, access, trace_id, mode_code, error)


@login_required
@require_POST
def disagreement_adjudicate(request: HttpRequest, slug: str, pk: int, trace_id: int, code: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    round_require_trace_shown(user=request.user, round=rnd, trace_id=trace_id)
    error = ""
    try:
        adjudication_record(
            round=rnd,
            trace=trace_id,
            mode=code,
            decision=request.POST.get("decision", ""),
            note=request.POST.get("note", ""),
            by=request.user,
        )
    except ValidationError as exc:
        error = _errors(exc)
    return _after_action(request, rnd, access, trace_id, code, error)


@login_required
@require_POST
def disagreement_comment(request: HttpRequest, slug: str, pk: int, trace_id: int, code: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    round_require_trace_shown(user=request.user, round=rnd, trace_id=trace_id)
    error = ""
    try:
        disagreement_comment_add(
            round=rnd, trace=trace_id, mode=code, body=request.POST.get("body", ""), by=request.user
        )
    except ValidationError as exc:
        error = _errors(exc)
    return _after_action(request, rnd, access, trace_id, code, error)


# --------------------------------------------------------------------------------------
# Refinement
# --------------------------------------------------------------------------------------


class ReviseForm(forms.Form):
    name = forms.CharField(max_length=200)
    definition = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 9}),
        help_text="Say what the mode is and where it stops: the disputed cases beside show where raters read it apart.",
    )
    note = forms.CharField(
        label="Why the change",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="Kept in the version's mapping, so the next round's readers see why the definition moved.",
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


# The disputed cases shown beside the form: enough to see the pattern, not the whole round.
REVISE_DISPUTES = 6


@login_required
@require_http_methods(["GET", "POST"])
def round_revise(request: HttpRequest, slug: str, pk: int, code: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    round_require_report_access(user=request.user, round=rnd)
    mode = FailureMode.objects.filter(version=rnd.taxonomy_version, code=code).select_related("category").first()
    if mode is None:
        return HttpResponse(f"No mode {code} in this round's taxonomy version.", status=404)
    trace_id = request.GET.get("trace") or request.POST.get("trace") or ""
    form = ReviseForm(
        request.POST or None,
        initial={
            "name": mode.name,
            "definition": mode.definition,
            "note": f"Disagreements on {code} in “{rnd.name}”"  # round names often say "Round" already
            + (f" (trace {trace_id})" if str(trace_id).isdigit() else "")
            + ".",
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            new = round_revise_definition(
                round=rnd,
                mode_code=code,
                name=form.cleaned_data["name"],
                definition=form.cleaned_data["definition"],
                note=form.cleaned_data["note"],
                by=request.user,
            )
        except ValidationError as exc:
            form.add_error(None, _errors(exc))
        else:
            messages.success(
                request,
                f"{code} revised in draft {new.version.label}. Start a follow-up round with it when ready.",
            )
            return redirect("annotations:round_detail", slug=slug, pk=pk)
    # The disagreement the manager came from first, then the round's others on this mode.
    found = round_disagreements(round=rnd, user=request.user, mode_code=code)
    first = (
        list(round_disagreements(round=rnd, user=request.user, mode_code=code, trace_id=int(trace_id)))
        if str(trace_id).isdigit()
        else []
    )
    others = [d for d in found[: REVISE_DISPUTES + 1] if all(d.trace.pk != f.trace.pk for f in first)]
    disputes = (first + others)[:REVISE_DISPUTES]
    _decorate(disputes, slug)
    steps = disagreement_evidence_steps(items=disputes)
    for d in disputes:
        for lab in d.labels:
            for s in lab.steps:
                s["step_row"] = steps.get((d.trace.pk, s["step"]))
    return render(
        request,
        "annotations/rounds/revise.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "mode": mode,
            "form": form,
            "trace_id": trace_id,
            "disputes": disputes,
            "n_disputes": len(found),
            "nav": "projects",
        },
    )
