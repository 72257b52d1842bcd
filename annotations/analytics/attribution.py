"""Analytics "where failures start": reads and the page (its own section, beside the dashboard).

Which attribution a trace counts with: its agreed attribution (the latest closed round's
consensus), else the ground truth an import brought (an imported source rater, e.g. Who&When),
as the judge is scored. Traces of draft or open rounds are left out for everyone who labels in
them (the blind rule, ``blind_trace_ids``); imported ground truth passes ``annotations_visible_to``.
"Modes that follow" are the trace's agreed-present modes whose evidence, in the closing round's
submitted labels, points at a step after the decisive one (a mode without step evidence cannot be
placed in time and is not counted).
"""

from __future__ import annotations

import io
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from annotations.analytics import attribution_stats as stats
from annotations.analytics import charts
from annotations.labels.visibility import annotations_visible_to, blind_trace_ids
from annotations.models import Annotation, Attribution, ModeLabel, Rater
from annotations.rounds.agreed import agreed_adjudications
from annotations.rounds.attribution.consensus import agreed_attributions
from traces.csv_cells import csv_writer
from traces.models import Project, Trace
from traces.projects.selectors import project_get_for_user


def attribution_rows(*, user, project: Project) -> list[dict[str, Any]]:
    """One row per attributed trace the user may see (see the module docstring)."""
    hidden = set(blind_trace_ids(user=user, project=project).values_list("trace_id", flat=True))
    rows: dict[int, dict[str, Any]] = {}
    imported = annotations_visible_to(user=user, project=project).filter(
        rater__kind=Rater.Kind.IMPORTED, round__isnull=True, state=Annotation.State.SUBMITTED
    )
    for tid, step, agent, modes in (
        Attribution.objects.filter(annotation__in=imported, no_single_step=False)
        .order_by("annotation__rater__name")
        .values_list("annotation__trace_id", "decisive_step", "agent", "modes")
    ):
        if step is not None or agent:
            rows.setdefault(tid, {"step": step, "agent": agent, "modes": list(modes), "round": None})
    for tid, d in agreed_attributions(project=project).items():
        if not d.no_single_step:
            rows[tid] = {"step": d.decisive_step, "agent": d.agent, "modes": list(d.modes), "round": d.round_id}
    for tid in hidden:
        rows.pop(tid, None)
    if not rows:
        return []
    meta = dict(
        (t, (f, n)) for t, f, n in Trace.objects.filter(pk__in=list(rows)).values_list("id", "mas_name", "n_steps")
    )
    present = {
        (a.trace_id, a.mode.code)
        for a in agreed_adjudications(project=project, trace_ids=list(rows))
        .filter(decision="present")
        .select_related("mode")
    }
    later: dict[int, set[str]] = {}
    rounds = {r["round"] for r in rows.values() if r["round"]}
    for tid, code, evidence in ModeLabel.objects.filter(
        annotation__round_id__in=rounds,
        annotation__trace_id__in=list(rows),
        annotation__state=Annotation.State.SUBMITTED,
        decision="present",
    ).values_list("annotation__trace_id", "mode__code", "evidence"):
        step = rows[tid]["step"]
        if (
            (tid, code) in present
            and step is not None
            and any(isinstance(e, dict) and isinstance(e.get("step"), int) and e["step"] > step for e in evidence or [])
        ):
            later.setdefault(tid, set()).add(code)
    return [
        {**r, "framework": meta[t][0], "n_steps": meta[t][1], "later_modes": sorted(later.get(t, set()))}
        for t, r in sorted(rows.items())
        if t in meta
    ]


def _csv(name: str, header: list[str], rows: list) -> HttpResponse:
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(header)
    w.writerows(rows)
    resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return resp


@login_required
@require_GET
def failures_start(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    rows = attribution_rows(user=request.user, project=project)
    agents = stats.agents_by_framework(rows)
    hist = stats.position_histogram(rows)
    first = stats.decisive_modes(rows)
    follow = stats.following_modes(rows)
    tables = {
        "agents": (["framework", "responsible_agent", "traces"], agents),
        "position": (["relative_position", "traces"], hist),
        "decisive_modes": (["mode", "traces"], first),
        "following_modes": (["decisive_mode", "later_mode", "traces"], follow),
    }
    if request.GET.get("format") == "csv" and request.GET.get("chart") in tables:
        name = request.GET["chart"]
        return _csv(f"{project.slug}-{name}", *tables[name])
    count = charts.num
    # charts.py XML-escapes every piece of text it writes (agent names come from traces), so the
    # markup is safe to inline, as on the dashboard.
    svgs = {
        "agents": charts.bar_chart(
            [(f"{a} ({f})", n) for f, a, n in agents[:15]],
            title="Responsible agents (by role name, per framework)",
            x_label="failed traces",
            fmt=count,
        ),
        "position": charts.bar_chart(
            hist,
            title="Where in the trace the decisive step lies",
            x_label="failed traces",
            fmt=count,
            colour="#D55E00",
        ),
        "decisive_modes": charts.bar_chart(
            first[:15], title="Modes the decisive steps belong to", x_label="failed traces", fmt=count, colour="#009E73"
        ),
        "following_modes": charts.bar_chart(
            [(f"{a} → {b}", n) for a, b, n in follow[:15]],
            title="Modes shown later in the same trace",
            x_label="failed traces",
            fmt=count,
            colour="#CC79A7",
        ),
    }
    return render(
        request,
        "annotations/analytics/failures_start.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "n": len(rows),
            "n_agreed": sum(1 for r in rows if r["round"]),
            "svgs": {name: mark_safe(svg) for name, svg in svgs.items()},  # noqa: S308
            "frameworks": sorted({r["framework"] or "unknown" for r in rows}),
        },
    )
