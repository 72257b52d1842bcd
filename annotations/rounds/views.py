"""HTML pages of calibration rounds: list, create (with an htmx sample preview), detail and
progress, the agreement report, disagreements with adjudication and discussion, and "revise this
definition". Views parse input, call one service or selector, render.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotations.models import Round
from annotations.rounds.selectors import (
    STRATA_FIELDS,
    project_annotator_choices,
    rater_set_parse,
    round_access,
    round_disagreements,
    round_extra_raters,
    round_get,
    round_kappa_trend,
    round_list_for_project,
    round_modes,
    round_open_disagreement_count,
    round_progress,
    round_require_report_access,
    round_sample_preview,
    round_versions_for_project,
)
from annotations.rounds.services import (
    adjudication_record,
    agreement_report_get,
    disagreement_comment_add,
    round_create,
    round_create_next,
    round_revise_definition,
    round_settings_update,
    round_transition,
)
from taxonomy.models import FailureMode, TaxonomyVersion
from traces.projects.selectors import project_get_for_user

User = get_user_model()


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


# --------------------------------------------------------------------------------------
# List
# --------------------------------------------------------------------------------------


@login_required
def round_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rounds = list(round_list_for_project(project=project, user=request.user))
    for r in rounds:
        r.headline = _num(r.headline_kappa)
        expected = (r.n_traces or 0) * (r.n_annotators or 0)
        r.percent = int(100 * (r.n_submitted or 0) / expected) if expected else 0
    return render(
        request,
        "annotations/rounds/list.html",
        {
            "project": project,
            "role": role,
            "rounds": rounds,
            "trend": _trend_chart(round_kappa_trend(project=project)) if rounds else None,
            "nav": "projects",
        },
    )


def _num(v: Any) -> float | None:
    if v in (None, "", "null"):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# Create (with an htmx sample preview)
# --------------------------------------------------------------------------------------


class RoundForm(forms.Form):
    name = forms.CharField(max_length=200)
    taxonomy_version = forms.ModelChoiceField(
        queryset=TaxonomyVersion.objects.none(),
        help_text="Frozen for the round: a draft version is published when the round opens.",
    )
    annotators = forms.ModelMultipleChoiceField(
        queryset=User.objects.none(), widget=forms.CheckboxSelectMultiple, help_text="Two or more."
    )
    method = forms.ChoiceField(
        choices=[("random", "Random sample"), ("stratified", "Stratified sample"), ("manual", "Pick traces by id")],
        initial="stratified",
        widget=forms.RadioSelect,
    )
    n = forms.IntegerField(label="Sample size", min_value=1, required=False, initial=10)
    seed = forms.IntegerField(label="Seed", required=False, initial=1, help_text="Same seed, same sample.")
    stratify_by = forms.ChoiceField(
        label="Stratify by",
        choices=[(k, k.capitalize() if k != "llm" else "LLM") for k in STRATA_FIELDS],
        required=False,
    )
    trace_ids = forms.CharField(
        label="Trace ids", required=False, help_text="For a hand-picked round: ids separated by spaces or commas."
    )
    reveal_in_review = forms.BooleanField(
        required=False, initial=True, label="Annotators see each other's labels once the review starts"
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["taxonomy_version"].queryset = round_versions_for_project(project=project)
        self.fields["taxonomy_version"].label_from_instance = lambda v: f"{v.label} ({v.get_status_display()})"
        self.fields["annotators"].queryset = project_annotator_choices(project=project)

    def clean_trace_ids(self) -> list[int]:
        raw = self.cleaned_data.get("trace_ids") or ""
        out = []
        for part in raw.replace(",", " ").split():
            if not part.isdigit():
                raise forms.ValidationError(f"{part!r} is not a trace id.")
            out.append(int(part))
        return out

    def sampling_kwargs(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "method": d.get("method") or "random",
            "n": d.get("n") or 0,
            "seed": d.get("seed") if d.get("seed") is not None else 0,
            "stratify_by": d.get("stratify_by") or "framework",
            "trace_ids": d.get("trace_ids") or [],
        }


@login_required
@require_http_methods(["GET", "POST"])
def round_new(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    initial: dict[str, Any] = {"taxonomy_version": project.taxonomy_version_id}
    after = request.GET.get("after")
    if after and after.isdigit():
        prev = Round.objects.filter(project=project, pk=int(after)).first()
        if prev:
            nxt = round_create_next(round=prev)
            initial.update(
                taxonomy_version=nxt["taxonomy_version"],
                annotators=nxt["annotators"],
                method="manual",
                trace_ids=" ".join(map(str, nxt["trace_ids"])),
                name=f"{prev.name} (follow-up)",
            )
    form = RoundForm(request.POST or None, project=project, initial=initial)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            rnd = round_create(
                project=project,
                name=d["name"],
                taxonomy_version=d["taxonomy_version"],
                annotators=list(d["annotators"]),
                reveal_in_review=d["reveal_in_review"],
                by=request.user,
                **form.sampling_kwargs(),
            )
        except ValidationError as exc:
            form.add_error(None, _errors(exc))
        else:
            messages.success(request, f"Round {rnd.name} created as a draft. Open it when you are ready.")
            return redirect("annotations:round_detail", slug=slug, pk=rnd.pk)
    return render(
        request,
        "annotations/rounds/new.html",
        {"project": project, "role": role, "form": form, "nav": "projects", "n_traces": project.traces.count()},
    )


@login_required
@require_http_methods(["GET", "POST"])
def round_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """htmx: the traces the create form would put in the round."""
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    form = RoundForm(request.POST or request.GET or None, project=project)
    form.is_valid()  # name/annotators may still be empty: only the sampling fields matter here
    ctx: dict[str, Any] = {"project": project}
    if any(f in form.errors for f in ("n", "seed", "trace_ids")):
        ctx["error"] = " ".join(str(e) for f in ("n", "seed", "trace_ids") for e in form.errors.get(f, []))
    else:
        try:
            ctx["preview"] = round_sample_preview(project=project, **form.sampling_kwargs())
        except ValidationError as exc:
            ctx["error"] = _errors(exc)
    return render(request, "annotations/rounds/_preview.html", ctx)


# --------------------------------------------------------------------------------------
# Detail and state changes
# --------------------------------------------------------------------------------------

STEPS = [("draft", "Draft"), ("open", "Blind labelling"), ("review", "Review & adjudication"), ("closed", "Closed")]


@login_required
def round_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_access(user=request.user, round=rnd)
    progress = round_progress(round=rnd, details=access.can_manage and access.can_see_report)
    page = Paginator(progress.rows, 50).get_page(request.GET.get("page"))
    my_traces = []
    if access.is_annotator and rnd.state in (Round.State.OPEN, Round.State.REVIEW):
        from annotations.models import Annotation, RoundTrace

        mine = dict(Annotation.objects.filter(round=rnd, rater__user=request.user).values_list("trace_id", "state"))
        for rt in (
            RoundTrace.objects.filter(round=rnd)
            .select_related("trace")
            .only("order", "trace__id", "trace__title", "trace__external_id", "trace__mas_name")
        ):
            my_traces.append((rt.trace, mine.get(rt.trace_id, "")))
    reached = [s for s, _ in STEPS].index(rnd.state)
    return render(
        request,
        "annotations/rounds/detail.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "access": access,
            "progress": progress,
            "page": page,
            "my_traces": my_traces,
            "steps": [(key, label, i < reached, i == reached) for i, (key, label) in enumerate(STEPS)],
            "open_disagreements": round_open_disagreement_count(round=rnd) if rnd.state == Round.State.REVIEW else 0,
            "next_versions": list(
                TaxonomyVersion.objects.filter(parent=rnd.taxonomy_version)
                .select_related("taxonomy")
                .order_by("number")
            ),
            "nav": "projects",
        },
    )


@login_required
@require_POST
def round_action(request: HttpRequest, slug: str, pk: int, action: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    try:
        if action == "reveal":
            round_settings_update(
                round=rnd, reveal_in_review=request.POST.get("reveal_in_review") == "1", by=request.user
            )
            messages.success(request, "Saved.")
        elif action in ("open", "review", "close"):
            to = {"open": "open", "review": "review", "close": "closed"}[action]
            round_transition(
                round=rnd,
                to=to,
                by=request.user,
                with_majority=request.POST.get("with_majority") == "1",
                force=request.POST.get("force") == "1",
            )
            messages.success(request, f"Round {rnd.name} is now {rnd.get_state_display().lower()}.")
        else:
            raise PermissionDenied("Unknown action.")
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    return redirect("annotations:round_detail", slug=slug, pk=pk)


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

STAT_COLUMNS = [
    ("mean_pairwise_kappa", "Mean Cohen's κ", "Mean of the pairwise Cohen's kappas"),
    ("fleiss_kappa", "Fleiss' κ", "Fleiss' kappa over all raters"),
    ("krippendorff_alpha", "Krippendorff's α", "Krippendorff's alpha (nominal), copes with missing labels"),
    ("pabak", "PABAK", "Prevalence- and bias-adjusted kappa"),
    ("gwet_ac1", "Gwet's AC1", "Gwet's first-order agreement coefficient, robust to rare modes"),
    ("percent_agreement", "% agree", "Observed agreement"),
]


def kappa_colour(v: float | None) -> tuple[str, str]:
    """(background, text) for a kappa: blues for agreement, reds below chance, grey undefined."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "#eef0f3", "#5f6b7a"
    v = max(-1.0, min(1.0, v))
    if v >= 0:
        light = 97 - 62 * v
        bg = f"hsl(214, 70%, {light:.0f}%)"
    else:
        light = 96 + 40 * v
        bg = f"hsl(4, 72%, {light:.0f}%)"
    return bg, "#ffffff" if light < 58 else "#1d2330"


def landis_koch(v: float | None) -> str:
    if v is None:
        return "undefined"
    for lim, word in ((0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if v <= lim:
            return word
    return "almost perfect"


def _cell(stat: dict[str, Any] | None, *, pct: bool = False) -> dict[str, Any]:
    stat = stat or {}
    v = stat.get("value")
    ci = stat.get("ci")
    fmt = (lambda x: f"{100 * x:.0f}%") if pct else (lambda x: f"{x:.2f}")
    return {
        "value": v,
        "text": "undefined" if v is None else fmt(v),
        "ci": f"{fmt(ci[0])} – {fmt(ci[1])}" if ci else "",
        "why": stat.get("undefined") or (stat.get("ci_undefined") if v is not None and not ci else "") or "",
        "undefined": v is None,
    }


def _report_context(rnd: Round, data: dict[str, Any]) -> dict[str, Any]:
    raters = data["raters"]
    n_humans = data.get("human_raters", len(raters))
    matrix = []
    for i, a in enumerate(raters):
        row = []
        for j, _b in enumerate(raters):
            v = data["kappa_matrix"][i][j]
            bg, fg = kappa_colour(v)
            why = ""
            if v is None and i != j:
                pair = next((p for p in data["pairwise"] if {p["a"], p["b"]} == {raters[i], raters[j]}), None)
                why = (pair or {}).get("kappa", {}).get("undefined") or "undefined"
            row.append(
                {
                    "v": v,
                    "text": "—" if i == j else ("undef." if v is None else f"{v:.2f}"),
                    "bg": bg,
                    "fg": fg,
                    "diag": i == j,
                    "why": why,
                    "b": raters[j],
                }
            )
        matrix.append({"rater": a, "human": i < n_humans, "cells": row})
    modes = {m.code: m for m in round_modes(version=rnd.taxonomy_version)}
    per_mode = []
    for block in data["per_mode"]:
        mode = modes.get(block["mode"])
        cells = [_cell(block.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS]
        v = block["mean_pairwise_kappa"]["value"]
        bg, fg = kappa_colour(v)
        per_mode.append(
            {
                "code": block["mode"],
                "name": mode.name if mode else "",
                "definition": mode.definition if mode else "",
                "prevalence": _cell(block.get("prevalence"), pct=True),
                "cells": cells,
                "sort": v if v is not None else 9,
                "bg": bg,
                "fg": fg,
                "band": landis_koch(v),
            }
        )
    per_mode.sort(key=lambda r: (r["sort"], r["code"]))
    cats = {c.code: c.name for c in rnd.taxonomy_version.categories.all()}
    per_category = [
        {
            "code": b["category"],
            "name": cats.get(b["category"], ""),
            "modes": b["modes"],
            "prevalence": _cell(b.get("prevalence"), pct=True),
            "cells": [_cell(b.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS],
        }
        for b in data["per_category"]
    ]
    overall = data["overall"]
    headline = _cell(data["mean_pairwise_kappa"])
    return {
        "data": data,
        "matrix": matrix,
        "per_mode": per_mode,
        "per_category": per_category,
        "columns": STAT_COLUMNS,
        "headline": headline,
        "headline_band": landis_koch(headline["value"]),
        "headline_bg": kappa_colour(headline["value"])[0],
        "headline_fg": kappa_colour(headline["value"])[1],
        "overall": {key: _cell(overall.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS},
        "overall_prevalence": _cell(overall.get("prevalence"), pct=True),
        "legend": [
            {"v": v, "bg": kappa_colour(v)[0], "fg": kappa_colour(v)[1]} for v in (-0.4, 0, 0.2, 0.4, 0.6, 0.8, 1.0)
        ],
    }


def _trend_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Coordinates for the SVG trend chart of headline kappa across rounds (rendered by a template)."""
    width, height = 720, 260
    left, right, top, bottom = 52, 24, 24, 62
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(rows)
    lo = min(
        [-0.2] + [r["lo"] for r in rows if r["lo"] is not None] + [r["kappa"] for r in rows if r["kappa"] is not None]
    )
    lo = math.floor(lo * 5) / 5
    hi = 1.0

    def y(v: float) -> float:
        return top + plot_h * (hi - v) / (hi - lo)

    def x(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n if n else plot_w / 2)

    points = []
    for i, r in enumerate(rows):
        k = r["kappa"]
        points.append(
            {
                "x": round(x(i), 1),
                "xl": round(x(i) - 5, 1),
                "xr": round(x(i) + 5, 1),
                "y": round(y(k), 1) if k is not None else None,
                "lo": round(y(r["lo"]), 1) if r["lo"] is not None else None,
                "hi": round(y(r["hi"]), 1) if r["hi"] is not None else None,
                "label": r["round"].name if len(r["round"].name) <= 16 else r["round"].name[:15] + "…",
                "name": r["round"].name,
                "kappa": "no report yet" if k is None else f"{k:.2f}",
                "version": r["version"],
                "changed": r["version_changed"],
                "state": r["round"].state,
                "pk": r["round"].pk,
            }
        )
    line = " ".join(f"{p['x']},{p['y']}" for p in points if p["y"] is not None)
    ticks = []
    v = lo
    while v <= hi + 1e-9:
        ticks.append({"v": f"{v:.1f}", "y": round(y(v), 1)})
        v = round(v + 0.2, 10)
    bands = [
        {"y": round(y(b), 1), "h": round(y(a) - y(b), 1), "label": name, "ly": round((y(a) + y(b)) / 2 + 4, 1)}
        for a, b, name in ((0.6, 0.8, "substantial"), (0.8, 1.0, "almost perfect"))
    ]
    version_marks = [
        {"x": round((points[i - 1]["x"] + p["x"]) / 2, 1), "version": p["version"]}
        for i, p in enumerate(points)
        if p["changed"] and i > 0
    ]
    return {
        "width": width,
        "height": height,
        "left": left,
        "tick_x": left - 8,
        "plot_w": plot_w,
        "right": width - right,
        "top": top,
        "bottom": height - bottom,
        "label_y": height - bottom + 18,
        "version_y": height - bottom + 34,
        "points": points,
        "line": line,
        "ticks": ticks,
        "zero_y": round(y(0), 1) if lo < 0 else None,
        "bands": bands,
        "version_marks": version_marks,
    }


@login_required
def round_report_page(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    extra_ids: list[int] = []
    raw = request.GET.getlist("rater")
    if raw:
        extra_ids = [int(r) for r in raw if r.isdigit()]
    elif request.GET.get("raters"):
        try:
            extra_ids = rater_set_parse(request.GET["raters"])
        except ValidationError as exc:
            messages.error(request, _errors(exc))
    try:
        report = agreement_report_get(round=rnd, extra_rater_ids=extra_ids)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
        extra_ids = []
        report = agreement_report_get(round=rnd)
    return render(
        request,
        "annotations/rounds/report.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "access": access,
            "report": report,
            "extra_raters": round_extra_raters(round=rnd),
            "selected": set(extra_ids),
            "rater_set": report.rater_set,
            "trend": _trend_chart(round_kappa_trend(project=project)),
            "nav": "projects",
            **_report_context(rnd, report.data),
        },
    )


# --------------------------------------------------------------------------------------
# Disagreements
# --------------------------------------------------------------------------------------


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
            "can_adjudicate": access.can_manage and rnd.state == Round.State.REVIEW,
            "can_comment": rnd.state in (Round.State.REVIEW, Round.State.CLOSED)
            and (access.can_manage or access.is_annotator),
            "nav": "projects",
        },
    )


def _one_disagreement(request: HttpRequest, rnd: Round, trace_id: int, mode_code: str):
    items = list(round_disagreements(round=rnd, user=request.user, mode_code=mode_code, trace_id=trace_id))
    _decorate(items, rnd.project.slug)
    return items[0] if items else None


def _render_card(request: HttpRequest, rnd: Round, access, trace_id: int, mode_code: str, error: str = ""):
    d = _one_disagreement(request, rnd, trace_id, mode_code)
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
        },
    )


@login_required
@require_POST
def disagreement_adjudicate(request: HttpRequest, slug: str, pk: int, trace_id: int, code: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
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
    if not request.headers.get("HX-Request"):
        if error:
            messages.error(request, error)
        return redirect(reverse("annotations:round_disagreements", kwargs={"slug": slug, "pk": pk}))
    return _render_card(request, rnd, access, trace_id, code, error)


@login_required
@require_POST
def disagreement_comment(request: HttpRequest, slug: str, pk: int, trace_id: int, code: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_require_report_access(user=request.user, round=rnd)
    error = ""
    try:
        disagreement_comment_add(
            round=rnd, trace=trace_id, mode=code, body=request.POST.get("body", ""), by=request.user
        )
    except ValidationError as exc:
        error = _errors(exc)
    if not request.headers.get("HX-Request"):
        if error:
            messages.error(request, error)
        return redirect(reverse("annotations:round_disagreements", kwargs={"slug": slug, "pk": pk}))
    return _render_card(request, rnd, access, trace_id, code, error)


# --------------------------------------------------------------------------------------
# Refinement
# --------------------------------------------------------------------------------------


class ReviseForm(forms.Form):
    name = forms.CharField(max_length=200)
    definition = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}))
    note = forms.CharField(
        label="Why (kept in the version's mapping)", widget=forms.Textarea(attrs={"rows": 3}), required=False
    )


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
            "note": f"Disagreements on {code} in round {rnd.name}"
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
            "nav": "projects",
        },
    )
