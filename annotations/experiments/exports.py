"""An experiment as CSV and as a LaTeX table (pure: no Django). One row per mode, category and task
success; CSV cells that could start a formula are neutralised by traces.csv_cells, LaTeX text is
escaped (annotations.analytics.paper.tex)."""

from __future__ import annotations

import io

from annotations.analytics.paper import tex
from traces.csv_cells import csv_writer

COLUMNS = [
    "level", "code", "name", "a_present", "a_known", "a_share", "a_low", "a_high", "b_present", "b_known",
    "b_share", "b_low", "b_high", "difference", "difference_low", "difference_high", "p_value", "p_adjusted",
    "min_detectable", "paired_tasks", "paired_a_only", "paired_b_only", "paired_difference", "paired_p_value",
    "undefined", "what_to_try",
]  # fmt: skip


def _cell(v) -> str:
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))


def _line(level: str, r: dict) -> list[str]:
    a, b, d, p = r["a"], r["b"], r["difference"], r.get("paired") or {}
    values = [level, r["code"], r["name"], a["k"], a["n"], a["value"], a["low"], a["high"], b["k"], b["n"],
              b["value"], b["low"], b["high"], d["value"], d["low"], d["high"], d["p_value"], r["p_adjusted"],
              r["min_detectable"], p.get("n"), p.get("a_only"), p.get("b_only"), p.get("difference"),
              p.get("p_value"), d["undefined"] or a["undefined"] or b["undefined"], r.get("what_to_try")]  # fmt: skip
    return [_cell(v) for v in values]


def experiment_csv(exp) -> str:
    out = io.StringIO()
    writer = csv_writer(out)
    writer.writerow(COLUMNS)
    for r in exp.modes:
        writer.writerow(_line("mode", r))
    for r in exp.categories:
        writer.writerow(_line("category", r))
    writer.writerow(_line("task success", exp.success))
    return out.getvalue()


DOWNLOADS = {"csv": ("text/csv; charset=utf-8", "csv"), "tex": ("application/x-tex; charset=utf-8", "tex")}


def experiment_file(exp, kind: str) -> str:
    """The experiment as ``kind`` (a key of DOWNLOADS)."""
    return experiment_csv(exp) if kind == "csv" else experiment_latex(exp)


def _pct(v) -> str:
    return "--" if v is None else f"{100 * v:.1f}"


def _tex_share(s: dict) -> str:
    return f"{_pct(s['value'])}" if s["k"] is None else f"{s['k']}/{s['n']} ({_pct(s['value'])})"


def _tex_row(label: str, r: dict) -> str:
    a, b, d = r["a"], r["b"], r["difference"]
    diff = "--" if d["value"] is None else f"{100 * d['value']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"
    p = "--" if r["p_adjusted"] is None else f"{r['p_adjusted']:.3g}"
    cells = [label, _tex_share(a), _tex_share(b), diff, p]
    return " & ".join(cells) + r" \\"


def experiment_latex(exp) -> str:
    """A booktabs table: per mode and category, each cohort's count/n (share %), the difference B - A
    in points with Newcombe's 95% interval, the adjusted p-value."""
    correction = "Benjamini-Hochberg" if exp.correction == "bh" else "Holm"
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{lrrrr}",
        r"\toprule",
        r"Mode & A & B & B $-$ A (pts) [95\% CI] & $p$ (adj.) \\",
        r"\midrule",
        *(_tex_row(f"{tex(r['code'])} {tex(r['name'])}", r) for r in exp.modes),
        r"\midrule",
        *(_tex_row(f"Category {tex(r['code'])} {tex(r['name'])}", r) for r in exp.categories),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{A: {tex(exp.a)} ({exp.n_a} traces); B: {tex(exp.b)} ({exp.n_b} traces). "
        rf"Labels: {tex(exp.source)}{' (' + tex(exp.caveat) + ')' if exp.caveat else ''}. "
        rf"Count/traces (share \%); difference with Newcombe's 95\% interval; score test, {correction} "
        r"adjustment across rows of each block.}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"
