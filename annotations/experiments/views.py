"""The experiment page: two cohorts compared per mode (the API's figures as a table). Thin."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotations.analytics.selectors import AGREED, dashboard_filter_choices
from annotations.experiments.exports import DOWNLOADS, experiment_file
from annotations.experiments.selectors import experiment_compare, experiment_sources
from traces.projects.selectors import project_get_for_user


def experiment_download(exp, kind: str, slug: str) -> HttpResponse:
    """The experiment as a CSV or LaTeX file (exports.DOWNLOADS), for the page and the API."""
    content_type, ext = DOWNLOADS[kind]
    response = HttpResponse(experiment_file(exp, kind), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{slug}-experiment.{ext}"'
    return response


def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return ""
    return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}"


def _count(s: dict) -> str:
    """ "k/n · share%", or for a corrected share "share% (n judged, h with agreed labels)"."""
    share = f"{_pct(s['value'])}%" if s["value"] is not None else ""
    if s["k"] is None:
        return f"{share or '—'} ({s['n']} judged, {s['n_human']} agreed)"
    return f"{s['k']}/{s['n']}" + (f" · {share}" if share else "")


def _display(row: dict) -> dict:
    a, b, d = row["a"], row["b"], row["difference"]
    return {
        **row,
        "a_text": _count(a),
        "a_ci": f"{_pct(a['low'])}–{_pct(a['high'])}%" if a["low"] is not None else "",
        "b_text": _count(b),
        "b_ci": f"{_pct(b['low'])}–{_pct(b['high'])}%" if b["low"] is not None else "",
        "d_text": f"{_pct(d['value'], True)} pts" if d["value"] is not None else "",
        "d_ci": f"{_pct(d['low'], True)} to {_pct(d['high'], True)}" if d["low"] is not None else "",
        "p_text": "" if row["p_adjusted"] is None else f"{row['p_adjusted']:.3g}",
        "significant": row["p_adjusted"] is not None and row["p_adjusted"] < 0.05,
        "mdd_text": (
            f"±{_pct(row['min_detectable'])} pts"
            if row["min_detectable"] is not None
            else ""
            if d["undefined"] and d["value"] is None
            else "too few traces"
        ),
    }


def chosen_source(request, project) -> tuple[list[tuple[str, str]], str]:
    """The label sources the user may pick on an experiment or monitoring page, and the one asked
    for in ``?rater=`` (the agreed labels when it is none of them)."""
    sources = experiment_sources(user=request.user, project=project)
    source = request.GET.get("rater") or AGREED
    return sources, (source if source in {s for s, _ in sources} else AGREED)


@login_required
@require_GET
def experiment_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    sources, source = chosen_source(request, project)
    a, b = request.GET.get("a", "").strip(), request.GET.get("b", "").strip()
    correction = request.GET.get("correction") if request.GET.get("correction") in ("holm", "bh") else "holm"
    exp, errors = None, {}
    if a or b:
        try:
            exp = experiment_compare(user=request.user, project=project, a=a, b=b, source=source, correction=correction)
        except ValidationError as exc:
            errors = {k: " ".join(v) for k, v in exc.message_dict.items()}
    kind = request.GET.get("download", "")
    if exp is not None and kind in DOWNLOADS:
        return experiment_download(exp, kind, project.slug)
    choices = dashboard_filter_choices(project=project)
    suggestions = [f"{field}:{value}" for field, values in choices.items() for value in values]
    return render(
        request,
        "annotations/experiments/compare.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "exp": exp,
            "modes": [_display(r) for r in exp.modes] if exp else [],
            "categories": [_display(r) for r in exp.categories] if exp else [],
            "success": _display(exp.success) if exp else None,
            "errors": errors,
            "a": a,
            "b": b,
            "source": source,
            "sources": sources,
            "correction": correction,
            "suggestions": suggestions,
            "query": request.GET.urlencode(),
        },
    )
