"""The judge's self-agreement and drift page (managers): two runs of one prompt set against each
other per mode, the humans' kappa beside them, and the downloads (CSV, LaTeX) of the same result."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render

from annotations.judge.reliability import (
    judge_reliability_pairs,
    judge_run_pair,
    judge_self_agreement,
    reliability_csv,
    reliability_latex,
)
from annotations.models import JudgeRun
from traces.projects.selectors import project_get_for_user


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


@login_required
def judge_reliability_page(request, slug):
    """``?a=<run>&b=<run>`` compares two runs; ``?run=<id>`` the run with the run it follows (or
    the run that follows it); no parameter lists the pairs of runs there are."""
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    pairs = judge_reliability_pairs(project=project)
    problems: list[str] = []
    result = None
    a, b, run = _int(request.GET.get("a")), _int(request.GET.get("b")), _int(request.GET.get("run"))
    for name in ("a", "b", "run"):
        if request.GET.get(name) and _int(request.GET.get(name)) is None:
            problems.append(f"{name}={request.GET[name]!r} is not a run number")
    chosen = None
    if not problems and (run is not None or a is not None):
        try:
            if run is not None:
                chosen = judge_run_pair(project=project, run_id=run)
            elif b is None:
                problems.append("give the run to compare with: ?a=<run>&b=<run>")
            else:
                chosen = judge_run_pair(project=project, run_id=a, against=b)
        except JudgeRun.DoesNotExist as exc:
            problems.append(str(exc))
        except ValidationError as exc:
            problems.extend(exc.messages)
    if chosen is not None:
        try:
            result = judge_self_agreement(project=project, user=request.user, run_a=chosen[0], run_b=chosen[1])
        except ValidationError as exc:
            problems.extend(exc.messages)
    if result is not None:
        fmt = request.GET.get("format")
        stem = f"{project.slug}-judge-reliability-{result['earlier'].pk}-{result['later'].pk}"
        if fmt == "csv":
            response = HttpResponse(reliability_csv(result), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{stem}.csv"'
            return response
        if fmt == "tex":
            response = HttpResponse(reliability_latex(result), content_type="application/x-tex; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{stem}.tex"'
            return response
    return render(
        request,
        "annotations/judge/reliability.html",
        {
            "project": project,
            "role": role,
            "pairs": pairs,
            "result": result,
            "problems": problems,
            "query": f"a={result['earlier'].pk}&b={result['later'].pk}" if result else "",
            "nav": "projects",
        },
    )
