"""An experiment as CSV (pure: no Django). One row per mode, category and task success; cells that
could start a formula are neutralised by traces.csv_cells."""

from __future__ import annotations

import io

from traces.csv_cells import csv_writer

COLUMNS = [
    "level", "code", "name", "a_present", "a_known", "a_share", "a_low", "a_high", "b_present", "b_known",
    "b_share", "b_low", "b_high", "difference", "difference_low", "difference_high", "p_value", "p_adjusted",
    "min_detectable", "paired_tasks", "paired_a_only", "paired_b_only", "paired_difference", "paired_p_value",
    "undefined",
]  # fmt: skip


def _cell(v) -> str:
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))


def _line(level: str, r: dict) -> list[str]:
    a, b, d, p = r["a"], r["b"], r["difference"], r.get("paired") or {}
    values = [level, r["code"], r["name"], a["k"], a["n"], a["value"], a["low"], a["high"], b["k"], b["n"],
              b["value"], b["low"], b["high"], d["value"], d["low"], d["high"], d["p_value"], r["p_adjusted"],
              r["min_detectable"], p.get("n"), p.get("a_only"), p.get("b_only"), p.get("difference"),
              p.get("p_value"), d["undefined"] or a["undefined"] or b["undefined"]]  # fmt: skip
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
