"""The judge comparison page (Table 2, judge-vs-judge kappa, corrected prevalences) and the
imported raters page (managers). Downloads (CSV, LaTeX) come from the same result as the page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotations.judge.comparison import (
    comparison_choices,
    comparison_csv,
    comparison_latex,
    comparison_versions,
    judge_comparison,
)
from annotations.judge.imported import imported_raters, rater_import
from annotations.judge.reliability import judge_reliability_pairs
from annotations.models import Round
from taxonomy.models import TaxonomyVersion
from traces.projects.selectors import project_get_for_user

MAX_UPLOAD = 50 * 1024 * 1024


def _project(request, slug):
    return project_get_for_user(user=request.user, slug=slug, capability="manage")


def comparison_request(request, project) -> tuple[list, Round | None, TaxonomyVersion | None, list[str]]:
    """The chosen sources (``?s=run:1&s=rater:4``), round (``?round=<id>``, else the project's
    agreed labels) and version (``?version=<id>``, else each judge's own and the working one);
    unknown values are reported, not ignored."""
    choices = {c.key: c for c in comparison_choices(project=project)}
    problems = []
    chosen = []
    for key in request.GET.getlist("s"):
        if key in choices:
            chosen.append(choices[key])
        else:
            problems.append(f"{key!r} is not a judge run or imported rater of this project")
    rnd = None
    if request.GET.get("round"):
        try:
            rnd = Round.objects.filter(project=project, pk=int(request.GET["round"]), state="closed").first()
        except ValueError:
            rnd = None
        if rnd is None:
            problems.append(f"round {request.GET['round']!r} is not a closed round of this project")
    version = None
    if request.GET.get("version"):
        version = comparison_versions(project=project).filter(pk=_int(request.GET["version"])).first()
        if version is None:
            problems.append(f"version {request.GET['version']!r} is not a taxonomy version this project uses")
    return chosen, rnd, version, problems


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return -1


@login_required
def judge_compare_page(request, slug):
    project, role = _project(request, slug)
    chosen, rnd, version, problems = comparison_request(request, project)
    result = None
    if chosen and not problems:
        result = judge_comparison(
            project=project, user=request.user, sources=chosen, round=rnd, taxonomy_version=version
        )
        fmt = request.GET.get("format")
        stem = f"{project.slug}-judges{'-round-' + str(rnd.pk) if rnd else ''}"
        if fmt == "csv":
            response = HttpResponse(comparison_csv(result), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{stem}.csv"'
            return response
        if fmt == "tex":
            response = HttpResponse(comparison_latex(result), content_type="application/x-tex; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{stem}.tex"'
            return response
    rounds = Round.objects.filter(project=project, state="closed").order_by("-closed_at")
    unreliable = bool(result) and any(
        not r["stats"]["pooled"]["reliable"] or not all(m["reliable"] for m in r["stats"]["modes"])
        for sec in result["sections"]
        for r in sec["raters"]
    )
    return render(
        request,
        "annotations/judge/compare.html",
        {
            "project": project,
            "role": role,
            "choices": comparison_choices(project=project),
            "chosen_keys": {c.key for c in chosen},
            "rounds": rounds,
            "round": rnd,
            "versions": comparison_versions(project=project),
            "version": version,
            "problems": problems,
            "result": result,
            "unreliable": unreliable,
            "reliability_pairs": judge_reliability_pairs(project=project) if result else [],
            "query": request.GET.urlencode(),
            "nav": "projects",
        },
    )


class ImportForm(forms.Form):
    name = forms.CharField(max_length=200, label="Rater name", help_text="e.g. “o1 via agentdash (lab B)”")
    file = forms.FileField(help_text="JSONL or CSV, one row per trace (see the format below).")
    format = forms.ChoiceField(choices=[("auto", "From the file name"), ("jsonl", "JSONL"), ("csv", "CSV")])


@login_required
@require_http_methods(["GET", "POST"])
def judge_imports_page(request, slug):
    project, role = _project(request, slug)
    form = ImportForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        if upload.size > MAX_UPLOAD:
            errors = [f"{upload.name} is over {MAX_UPLOAD // 2**20} MiB"]
        else:
            try:
                text = upload.read().decode("utf-8-sig")
                result = rater_import(
                    project=project,
                    by=request.user,
                    name=form.cleaned_data["name"],
                    text=text,
                    filename=upload.name,
                    fmt=form.cleaned_data["format"],
                )
            except UnicodeDecodeError:
                errors = [f"{upload.name} is not UTF-8 text; nothing was imported"]
            except ValidationError as exc:
                errors = (
                    [m for msgs in exc.message_dict.values() for m in msgs]
                    if hasattr(exc, "error_dict")
                    else exc.messages
                )
            else:
                messages.success(
                    request,
                    f"Imported {result.n_labels} labels on {result.n_traces} traces as “{result.rater.name}”.",
                )
                return redirect("annotations:judge_imports", slug=project.slug)
    return render(
        request,
        "annotations/judge/imports.html",
        {
            "project": project,
            "role": role,
            "form": form,
            "errors": errors,
            "raters": imported_raters(project=project),
            "nav": "projects",
        },
    )
