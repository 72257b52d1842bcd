"""The analytics dashboard: where failures concentrate, filterable, every chart as SVG/PNG/CSV.

GET p/<slug>/analytics/?mas_name=&llm_name=&benchmark=&rater=agreed|<rater id>
    &a=<field>:<value>&b=<field>:<value>&correction=holm|bh
    [&format=csv|svg&chart=<name>]  -> one chart's data as CSV, or the chart as an SVG file
"""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass, field

import numpy as np
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from annotations.analytics import charts
from annotations.analytics import stats as analytics
from annotations.analytics.selectors import (
    AGREED,
    FILTER_FIELDS,
    dashboard_filter_choices,
    dashboard_sources,
    label_matrix_cached,
    labels_fingerprint,
    project_trace_facts,
)
from annotations.rounds.targets import target_version_choices, target_version_resolve
from traces.csv_cells import csv_writer
from traces.projects.selectors import project_get_for_user

FIELD_LABELS = {"mas_name": "Framework", "llm_name": "LLM", "benchmark": "Benchmark"}
CACHE_SECONDS = 600


@dataclass
class Chart:
    name: str
    title: str
    svg: str
    columns: list[str]
    rows: list[list]
    caption: str = ""
    table: list[list[str]] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)

    @property
    def svg_html(self):
        # charts.py XML-escapes every piece of text it writes (labels come from data), so the
        # markup is safe to inline.
        return mark_safe(self.svg)  # noqa: S308


def _f(v: float, digits: int = 4):
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), digits)


def _cohort_mask(M, spec: str) -> tuple[np.ndarray, str] | None:
    if not spec or ":" not in spec:
        return None
    key, value = spec.split(":", 1)
    if key not in FILTER_FIELDS:
        return None
    return M.groups[key].equals(value), f"{FIELD_LABELS[key]} {value or '(unknown)'}"


@dataclass(frozen=True)
class _Labels:
    """How the dashboard's charts name modes and categories."""

    codes: list[str]
    mode_label: dict[str, str]
    cat_label: dict[str, str]
    cat_legend: list[tuple[str, str]]

    @classmethod
    def of(cls, M) -> _Labels:
        mode_label = {c: f"FM-{c} {M.names.get(c, '')}" for c in M.codes}
        cat_label = {c: f"FC{c} {M.category_names.get(c, '')}" for c in M.categories}
        legend = [(cat_label[c], charts.PALETTE[i % 8]) for i, c in enumerate(M.categories)]
        return cls(list(M.codes), mode_label, cat_label, legend)


def build_charts(M, *, cohort_a: str = "", cohort_b: str = "", correction: str = "holm") -> tuple[list[Chart], dict]:
    """Every chart of the dashboard, in page order, and the summary figures above them."""
    L = _Labels.of(M)
    out: list[Chart] = []
    summary: dict = {"traces": int(M.X.shape[0])}
    C = analytics.category_matrix(M.X, M.column_categories, M.categories)
    out += _mode_charts(M, L, summary)
    out += _category_charts(M, L, C, summary)
    out += _framework_charts(M, L, summary)
    out += _correlation_charts(M, L, C, summary)
    out += _cohort_charts(M, L, summary, cohort_a=cohort_a, cohort_b=cohort_b, correction=correction)
    out += _efficiency_charts(M, L, summary)
    return out, summary


def _mode_charts(M, L: _Labels, summary: dict) -> list[Chart]:
    """Modes: share of all failures, share of traces."""
    codes, mode_label, cat_legend = L.codes, L.mode_label, L.cat_legend
    out: list[Chart] = []
    dist = analytics.mode_distribution(M.X, codes)
    summary["failures"] = sum(d.present for d in dist)
    colours = [  # each mode in its category's colour
        charts.PALETTE[M.categories.index(cc) % 8] if cc in M.categories else charts.PALETTE[0]
        for cc in M.column_categories
    ]
    out.append(
        Chart(
            "modes_failures",
            "Share of all failures, per mode",
            charts.bar_chart(
                [(mode_label[d.code], d.share_of_failures) for d in dist],
                title="Share of all failures, per mode",
                x_label="% of all failure labels",
                legend=cat_legend,
                colours=colours,
            ),
            ["mode", "name", "present", "known", "share_of_failures", "share_of_traces"],
            [
                [d.code, M.names.get(d.code, ""), d.present, d.known, _f(d.share_of_failures), _f(d.share_of_traces)]
                for d in dist
            ],
            "How the MAST paper reports modes (e.g. FM-1.3 at 17.14%): a mode's labels over all failure labels.",
        )
    )
    out.append(
        Chart(
            "modes_traces",
            "Share of traces showing each mode",
            charts.bar_chart(
                [(mode_label[d.code], d.share_of_traces) for d in dist],
                title="Share of traces showing each mode",
                x_label="% of labelled traces",
                legend=cat_legend,
                colours=colours,
            ),
            ["mode", "name", "present", "known", "share_of_traces"],
            [[d.code, M.names.get(d.code, ""), d.present, d.known, _f(d.share_of_traces)] for d in dist],
            "Traces where the mode is present over traces where it was labelled.",
        )
    )

    return out


def _category_charts(M, L: _Labels, C: np.ndarray, summary: dict) -> list[Chart]:
    """Failure categories."""
    cat_label = L.cat_label
    out: list[Chart] = []
    cats = analytics.category_distribution(M.X, M.column_categories, M.categories, C=C)
    out.append(
        Chart(
            "categories",
            "Failure categories",
            charts.grouped_bars(
                [cat_label[c["category"]] for c in cats],
                [
                    ("Share of all failures", [c["share_of_failures"] for c in cats]),
                    ("Share of traces showing it", [c["share_of_traces"] for c in cats]),
                ],
                title="Failure categories",
                x_label="%",
                fmt=charts.pct,
            ),
            ["category", "name", "failures", "share_of_failures", "traces_showing", "share_of_traces"],
            [
                [
                    c["category"],
                    M.category_names.get(c["category"], ""),
                    c["failures"],
                    _f(c["share_of_failures"]),
                    c["traces_showing"],
                    _f(c["share_of_traces"]),
                ]
                for c in cats
            ],
        )
    )

    return out


def _framework_charts(M, L: _Labels, summary: dict) -> list[Chart]:
    """Categories and modes per framework."""
    cat_label = L.cat_label
    out: list[Chart] = []
    groups = analytics.per_group(M.X, M.groups["mas_name"], M.column_categories, M.categories)
    gnames = [g["group"] or "(unknown)" for g in groups]
    out.append(
        Chart(
            "frameworks_categories",
            "Failures per framework, by category",
            charts.grouped_bars(
                gnames,
                [(cat_label[c], [g["by_category"][c] for g in groups]) for c in M.categories],
                title="Failures per framework, by category",
                x_label="failure labels",
            ),
            ["framework", "traces", "failures", *[f"FC{c}" for c in M.categories]],
            [[g["group"], g["traces"], g["failures"], *[g["by_category"][c] for c in M.categories]] for g in groups],
            "The MAST paper's failures-per-system figure: counts of failure labels per category.",
        )
    )
    out.append(
        Chart(
            "frameworks_rate",
            "Failure rate per framework",
            charts.grouped_bars(
                gnames,
                [("Traces with ≥1 failure", [g["failure_rate"] for g in groups])],
                title="Failure rate per framework",
                x_label="% of traces",
                fmt=charts.pct,
                max_value=1.0,
            ),
            ["framework", "traces", "failure_rate", "failures_per_trace"],
            [[g["group"], g["traces"], _f(g["failure_rate"]), _f(g["failures_per_trace"])] for g in groups],
            headers=["Framework", "Traces", "Failure rate", "Failures per trace"],
            table=[
                [
                    g["group"] or "(unknown)",
                    str(g["traces"]),
                    charts.pct(g["failure_rate"]),
                    charts.num(g["failures_per_trace"]),
                ]
                for g in groups
            ],
        )
    )

    return out


def _correlation_charts(M, L: _Labels, C: np.ndarray, summary: dict) -> list[Chart]:
    """Co-occurrence (phi) of modes and of categories."""
    codes, mode_label, cat_label = L.codes, L.mode_label, L.cat_label
    out: list[Chart] = []
    phi = analytics.phi_matrix(M.X) if M.X.shape[0] else np.full((len(codes), len(codes)), np.nan)
    lo, hi = analytics.off_diagonal_range(phi)
    out.append(
        Chart(
            "corr_modes",
            "Co-occurrence between modes (phi)",
            charts.heatmap(
                codes, phi.tolist(), title="Co-occurrence between modes (phi)", row_names=[mode_label[c] for c in codes]
            ),
            ["mode", *codes],
            [[c, *[_f(v, 3) for v in phi[i]]] for i, c in enumerate(codes)],
            f"Off-diagonal range {charts._corr(lo)} to {charts._corr(hi)} (the paper: at most 0.63 between modes).",
        )
    )
    cphi = analytics.phi_matrix(C) if C.shape[0] else np.full((len(M.categories),) * 2, np.nan)
    clo, chi = analytics.off_diagonal_range(cphi)
    out.append(
        Chart(
            "corr_categories",
            "Co-occurrence between categories (phi)",
            charts.heatmap(
                [f"FC{c}" for c in M.categories],
                cphi.tolist(),
                title="Co-occurrence between categories (phi)",
                row_names=[cat_label[c] for c in M.categories],
            ),
            ["category", *[f"FC{c}" for c in M.categories]],
            [[f"FC{c}", *[_f(v, 3) for v in cphi[i]]] for i, c in enumerate(M.categories)],
            f"Off-diagonal range {charts._corr(clo)} to {charts._corr(chi)} (the paper: 0.17 to 0.32).",
        )
    )

    return out


def _cohort_charts(M, L: _Labels, summary: dict, *, cohort_a: str, cohort_b: str, correction: str) -> list[Chart]:
    """Two cohorts compared, when both are chosen."""
    codes, mode_label = L.codes, L.mode_label
    out: list[Chart] = []
    a, b = _cohort_mask(M, cohort_a), _cohort_mask(M, cohort_b)
    if a and b:
        rows = analytics.cohort_compare(M.X[a[0]], M.X[b[0]], codes, correction=correction)
        name_a, name_b = a[1], b[1]
        summary["cohort"] = {"a": name_a, "b": name_b, "n_a": int(a[0].sum()), "n_b": int(b[0].sum())}
        out.append(
            Chart(
                "cohort",
                f"{name_a} vs {name_b}",
                charts.grouped_bars(
                    [mode_label[r.code] for r in rows],
                    [(f"A: {name_a}", [r.a_rate for r in rows]), (f"B: {name_b}", [r.b_rate for r in rows])],
                    title=f"Share of traces per mode: {name_a} vs {name_b}",
                    x_label="% of traces",
                    fmt=charts.pct,
                    markers=[analytics.significance_marker(r.p_corrected) for r in rows],
                ),
                [
                    "mode",
                    "a_present",
                    "a_known",
                    "a_rate",
                    "b_present",
                    "b_known",
                    "b_rate",
                    "fisher_p",
                    "p_corrected",
                    "significant",
                ],
                [
                    [
                        r.code,
                        r.a_present,
                        r.a_known,
                        _f(r.a_rate),
                        r.b_present,
                        r.b_known,
                        _f(r.b_rate),
                        _f(r.p_value, 6),
                        _f(r.p_corrected, 6),
                        int(r.significant),
                    ]
                    for r in rows
                ],
                f"Fisher's exact test per mode, {'Holm' if correction == 'holm' else 'Benjamini-Hochberg'} correction "
                "across modes; * p<0.05, ** p<0.01, *** p<0.001 (corrected).",
                headers=["Mode", "A", "B", "Fisher p", "Corrected p", ""],
                table=[
                    [
                        f"FM-{r.code}",
                        charts.pct(r.a_rate),
                        charts.pct(r.b_rate),
                        "–" if math.isnan(r.p_value) else f"{r.p_value:.3g}",
                        "–" if math.isnan(r.p_corrected) else f"{r.p_corrected:.3g}",
                        analytics.significance_marker(r.p_corrected),
                    ]
                    for r in rows
                ],
            )
        )

    return out


def _efficiency_charts(M, L: _Labels, summary: dict) -> list[Chart]:
    """Steps, switches and repetition per framework, failed against succeeded."""
    out: list[Chart] = []
    failed = np.any(M.X == 1, axis=1).astype(float) if M.X.shape[0] else np.zeros(0)
    eff = analytics.efficiency(M.groups["mas_name"], M.steps, M.switches, M.repeated, failed, M.success)
    out.append(
        Chart(
            "efficiency",
            "Efficiency per framework",
            charts.grouped_bars(
                [e["group"] or "(unknown)" for e in eff],
                [
                    ("Steps", [e["mean_steps"] for e in eff]),
                    ("Agent switches", [e["mean_switches"] for e in eff]),
                    ("Repeated steps", [e["mean_repeated"] for e in eff]),
                ],
                title="Efficiency: mean per trace, per framework",
                x_label="mean per trace",
            ),
            [
                "framework",
                "traces",
                "mean_steps",
                "median_steps",
                "mean_switches",
                "mean_repeated",
                "failure_rate",
                "success_rate",
                "outcomes_known",
            ],
            [
                [
                    e["group"],
                    e["traces"],
                    _f(e["mean_steps"]),
                    _f(e["median_steps"]),
                    _f(e["mean_switches"]),
                    _f(e["mean_repeated"]),
                    _f(e["failure_rate"]),
                    _f(e["success_rate"]),
                    e["outcomes_known"],
                ]
                for e in eff
            ],
            "Beside correctness: the failure rate (traces with at least one failure label) and the task success "
            "rate where the outcome is known.",
            headers=["Framework", "Traces", "Steps", "Switches", "Repeated", "Failure rate", "Success rate"],
            table=[
                [
                    e["group"] or "(unknown)",
                    str(e["traces"]),
                    charts.num(e["mean_steps"]),
                    charts.num(e["mean_switches"]),
                    charts.num(e["mean_repeated"]),
                    charts.pct(e["failure_rate"]),
                    charts.pct(e["success_rate"]),
                ]
                for e in eff
            ],
        )
    )
    return out


def _csv_response(chart: Chart, slug: str) -> HttpResponse:
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(chart.columns)
    w.writerows(chart.rows)
    resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{slug}-{chart.name}.csv"'
    return resp


def _charts_cached(user, project, source, filters, target, facts, *, cohort: tuple[str, str], correction: str):
    """(charts, summary, source label, labels carried by a mapping, the mapping) of one selection.

    Cached per (project, label source, filters, labels fingerprint, cohort): the fingerprint
    changes with any label, trace or visibility change, so a hit is never stale."""
    fingerprint = labels_fingerprint(
        user=user, project=project, source=source, filters=filters, target=target, facts_of_traces=facts
    )
    key = "mast:dashboard:" + hashlib.sha256(f"{fingerprint}|{cohort[0]}|{cohort[1]}|{correction}".encode()).hexdigest()
    cached = cache.get(key)
    if cached is None:
        # the matrix is cached on its own too, so a new cohort or correction reuses it
        M = label_matrix_cached(user=user, project=project, source=source, filters=filters, target=target,
                                facts=facts, fingerprint=fingerprint)  # fmt: skip
        chart_list, summary = build_charts(M, cohort_a=cohort[0], cohort_b=cohort[1], correction=correction)
        cached = (chart_list, summary, M.source_label, M.n_mapped, M.mapping)
        cache.set(key, cached, CACHE_SECONDS)
    return cached


@login_required
@require_GET
def dashboard(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    filters = {k: [v for v in request.GET.getlist(k) if v] for k in FILTER_FIELDS}
    filters = {k: v for k, v in filters.items() if v}
    sources = dashboard_sources(user=request.user, project=project)
    source = request.GET.get("rater") or AGREED
    if source not in {s for s, _ in sources}:
        source = AGREED  # a rater this user may not see falls back to the agreed labels
    correction = request.GET.get("correction", "holm")
    if correction not in analytics.CORRECTIONS:
        correction = "holm"
    cohort_a, cohort_b = request.GET.get("a", ""), request.GET.get("b", "")
    target_choices = list(target_version_choices(project=project))
    try:
        target = target_version_resolve(project=project, raw=request.GET.get("version"))
    except ValueError:
        target = project.taxonomy_version  # a forgiving HTML page: an unusable ?version= shows the working one
    if target.pk not in {v.pk for v in target_choices}:
        target = project.taxonomy_version
    facts = project_trace_facts(project=project)
    chart_list, summary, source_label, n_mapped, mapping = _charts_cached(
        request.user, project, source, filters, target, facts, cohort=(cohort_a, cohort_b), correction=correction
    )

    fmt = request.GET.get("format")
    if fmt in ("csv", "svg"):
        chart = next((c for c in chart_list if c.name == request.GET.get("chart")), None)
        if chart is None:
            raise Http404("No such chart for this selection.")
        if fmt == "csv":
            return _csv_response(chart, project.slug)
        resp = HttpResponse(chart.svg, content_type="image/svg+xml; charset=utf-8")
        resp["Content-Disposition"] = f'attachment; filename="{project.slug}-{chart.name}.svg"'
        return resp

    choices = dashboard_filter_choices(project=project, facts=facts)
    cohort_options = [(f"{k}:{v}", f"{FIELD_LABELS[k]}: {v}") for k in FILTER_FIELDS for v in choices[k]]
    query = request.GET.copy()
    for k in ("format", "chart"):
        query.pop(k, None)
    return render(
        request,
        "annotations/analytics/dashboard.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "tab": "analytics",
            "charts": {c.name: c for c in chart_list},
            "chart_list": chart_list,
            "summary": summary,
            "choices": choices,
            "filters": filters,
            "sources": sources,
            "source": source,
            "source_label": source_label,
            "cohort_options": cohort_options,
            "cohort_a": cohort_a,
            "cohort_b": cohort_b,
            "correction": correction,
            "query": query.urlencode(),
            "n_mapped": n_mapped,
            "mapping": mapping,
            "target": target,
            "target_choices": target_choices,
            "filter_fields": [(k, FIELD_LABELS[k], choices[k], filters.get(k, [])) for k in FILTER_FIELDS],
        },
    )
