"""Presentation of a report's attribution section (pure: plain dicts in, template rows out)."""

from __future__ import annotations

from typing import Any

from annotations.rounds.report import stat_cell


def _dist(stat: dict[str, Any] | None) -> dict[str, Any]:
    stat = stat or {}
    v, ci = stat.get("value"), stat.get("ci")
    return {
        "value": v,
        "text": "undefined" if v is None else f"{v:.2f} steps",
        "ci": f"{ci[0]:.2f} – {ci[1]:.2f}" if ci else "",
        "why": stat.get("undefined") or (stat.get("ci_undefined") if v is not None and not ci else "") or "",
        "undefined": v is None,
    }


def attribution_context(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """Rows for ``rounds/_part_attribution.html``; None when nobody attributed in the round."""
    if not section:
        return None
    agent, step = section["agent"], section["step"]
    return {
        "n_traces": section["n_traces"],
        "n_disagreements": section.get("n_disagreements", 0),
        "raters": [
            {"name": name, "n": section["n_attributed"].get(name, 0), "none": section["n_no_single_step"].get(name, 0)}
            for name in section["raters"]
        ],
        "agent_rows": [
            (
                "Mean pairwise Cohen's kappa",
                "Mean of the defined kappas over rater pairs",
                stat_cell(agent["mean_pairwise_kappa"]),
            ),
            (
                "Fleiss' kappa",
                f"Over the {agent['fleiss_kappa'].get('n_units', 0)} traces every rater attributed to an agent",
                stat_cell(agent["fleiss_kappa"]),
            ),
            (
                "Percent agreement",
                "Share of rater pairs naming the same agent",
                stat_cell(agent["percent_agreement"], pct=True),
            ),
        ],
        "step_rows": [
            ("Exact", "Same decisive step (or both: no single decisive step)", stat_cell(step["exact"], pct=True)),
            ("Within ±1 step", "Decisive steps at most one step apart", stat_cell(step["within_1"], pct=True)),
            ("Within ±3 steps", "Decisive steps at most three steps apart", stat_cell(step["within_3"], pct=True)),
            ("Mean absolute distance", "Over pairs that both named a step", _dist(step["mean_abs_distance"])),
        ],
        "n_step_units": step["n_units"],
        "pairs": [
            {
                "a": p["a"],
                "b": p["b"],
                "n": p["n"],
                "kappa": stat_cell(p["kappa"]),
                "pct": stat_cell(p["percent_agreement"], pct=True),
            }
            for p in agent["pairs"]
        ],
    }
