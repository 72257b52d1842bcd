"""How a round's agreement report and the agreement trend look: colours, verbal bands, table cells and
the trend chart's coordinates (pure: no Django; the views pass in stored report data and modes)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def number(v: Any) -> float | None:
    """A float out of a JSON text value (stored reports are read with KT()), or None."""
    if v in (None, "", "null"):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


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
    # Text contrast AA (4.5:1): white text needs a background at 50% lightness or darker, dark text
    # one at 60% or lighter (62% for the reds); the colours between suit neither, so none is used.
    if v >= 0:
        light = 97 - 62 * v
        if 50 < light < 60:
            light = 50 if light < 55 else 60
        bg = f"hsl(214, 70%, {light:.0f}%)"
    else:
        light = max(62.0, 96 + 40 * v)
        bg = f"hsl(4, 72%, {light:.0f}%)"
    return bg, "#ffffff" if light <= 50 else "#1d2330"


def landis_koch(v: float | None) -> str:
    if v is None:
        return "undefined"
    for lim, word in ((0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if v <= lim:
            return word
    return "almost perfect"


def stat_cell(stat: dict[str, Any] | None, *, pct: bool = False) -> dict[str, Any]:
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


def report_context(data: dict[str, Any], *, modes: Mapping[str, Any], categories: Mapping[str, str]) -> dict[str, Any]:
    """Template context of a stored report ``data``: the kappa matrix with colours, per-mode rows
    (worst first) and per-category rows. ``modes``: code -> object with ``name`` and ``definition``;
    ``categories``: code -> name."""
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
    per_mode = []
    for block in data["per_mode"]:
        mode = modes.get(block["mode"])
        cells = [stat_cell(block.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS]
        v = block["mean_pairwise_kappa"]["value"]
        bg, fg = kappa_colour(v)
        per_mode.append(
            {
                "code": block["mode"],
                "name": mode.name if mode else "",
                "definition": mode.definition if mode else "",
                "prevalence": stat_cell(block.get("prevalence"), pct=True),
                "cells": cells,
                "sort": v if v is not None else 9,
                "bg": bg,
                "fg": fg,
                "band": landis_koch(v),
            }
        )
    per_mode.sort(key=lambda r: (r["sort"], r["code"]))
    per_category = [
        {
            "code": b["category"],
            "name": categories.get(b["category"], ""),
            "modes": b["modes"],
            "prevalence": stat_cell(b.get("prevalence"), pct=True),
            "cells": [stat_cell(b.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS],
        }
        for b in data["per_category"]
    ]
    overall = data["overall"]
    headline = stat_cell(data["mean_pairwise_kappa"])
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
        "overall": {key: stat_cell(overall.get(key), pct=key == "percent_agreement") for key, _, _ in STAT_COLUMNS},
        "overall_prevalence": stat_cell(overall.get("prevalence"), pct=True),
        "legend": [
            {"v": v, "bg": kappa_colour(v)[0], "fg": kappa_colour(v)[1]} for v in (-0.4, 0, 0.2, 0.4, 0.6, 0.8, 1.0)
        ],
    }


SERIES = (
    ("modes", "Failure-mode κ", "mean pairwise Cohen's κ of the mode labels"),
    ("attribution", "Attribution agreement", "mean pairwise Cohen's κ of the responsible agent"),
)
PROVISIONAL = "provisional: in review"


def _axis_name(name: str, chars: int) -> str:
    return name if len(name) <= chars else name[: max(chars - 1, 1)].rstrip() + "…"


@dataclass(frozen=True)
class _Frame:
    """The trend chart's geometry: the plot's box and the kappa range it shows."""

    n: int
    width: int = 720
    left: int = 52
    right: int = 104  # the band names sit in the right margin, clear of the points
    top: int = 28
    lo: float = -0.2
    hi: float = 1.0
    chars: int = 0
    tilted: bool = False
    height: int = 240
    bottom: int = 40

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> _Frame:
        n, f = len(rows), cls(n=len(rows))
        plot_w = f.width - f.left - f.right
        chars = int((plot_w / n if n else plot_w) / 6.8)
        tilted = chars < 10
        bottom = 96 if tilted else 40
        values = [
            v
            for r in rows
            for key, _, _ in SERIES
            if r.get(key)
            for v in (r[key]["lo"], r[key]["kappa"])
            if v is not None
        ]
        lo = math.floor(min([-0.2, *values]) * 5) / 5
        return cls(n=n, lo=lo, chars=22 if tilted else chars, tilted=tilted, height=240 + bottom - 40, bottom=bottom)

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def y(self, v: float) -> float:
        return self.top + self.plot_h * (self.hi - v) / (self.hi - self.lo)

    def x(self, i: int) -> float:
        return self.left + (self.plot_w * (i + 0.5) / self.n if self.n else self.plot_w / 2)


def _trend_point(frame: _Frame, key: str, label: str, stat: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """One round's point in one series: its marker, whisker and the text of its tooltip."""
    cx, k = entry["x"], stat["kappa"]
    point = {
        "series": key,
        "series_label": label,
        "x": cx,
        "xl": round(cx - 5, 1),
        "xr": round(cx + 5, 1),
        "y": round(frame.y(k), 1) if k is not None else None,
        "lo": round(frame.y(stat["lo"]), 1) if stat["lo"] is not None else None,
        "hi": round(frame.y(stat["hi"]), 1) if stat["hi"] is not None else None,
        "kappa": f"{k:.2f}" if k is not None else stat.get("why") or "undefined",
        "ci": "" if stat["lo"] is None or stat["hi"] is None else f"{stat['lo']:.2f}–{stat['hi']:.2f}",
        "name": entry["name"],
        "pk": entry["pk"],
        "provisional": entry["provisional"],
        "version": entry["version"],
    }
    if point["y"] is not None:
        d, py = 7.0, point["y"]
        point["diamond"] = f"{cx},{py - d} {cx + d},{py} {cx},{py + d} {cx - d},{py}"
    return point


def _trend_rounds(frame: _Frame, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, list]]:
    """One slot per round (named, tagged with its version) and each series' points."""
    tags: dict[Any, str] = {}
    for r in rows:
        tags.setdefault(r.get("version_id", r["version"]), f"V{len(tags) + 1}")
    rounds: list[dict[str, Any]] = []
    series: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in SERIES}
    for i, r in enumerate(rows):
        name = r["round"].name
        entry = {
            "x": round(frame.x(i), 1),
            "name": name,
            "axis_name": _axis_name(name, frame.chars),
            "pk": r["round"].pk,
            "provisional": r["provisional"],
            "version": r["version"],
            "tag": tags[r.get("version_id", r["version"])],
            "changed": r["version_changed"],
            "revised": r.get("revised", []),
            "measured": [],
        }
        for key, label, _ in SERIES:
            if r.get(key) is not None:
                point = _trend_point(frame, key, label, r[key], entry)
                series[key].append(point)
                entry["measured"].append(point)
        rounds.append(entry)
    return rounds, series


def _trend_segments(series: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The lines joining each series' drawn points; dashed where either end is provisional."""
    segments = []
    for key, _, _ in SERIES:
        drawn = [p for p in series[key] if p["y"] is not None]
        for a, b in zip(drawn, drawn[1:], strict=False):
            segments.append(
                {
                    "series": key,
                    "x1": a["x"],
                    "y1": a["y"],
                    "x2": b["x"],
                    "y2": b["y"],
                    "provisional": a["provisional"] or b["provisional"],
                }
            )
    return segments


def _trend_versions(rounds: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Where the taxonomy version changes (dashed marks), the key of versions and their revisions."""
    versions: list[dict[str, Any]] = []
    for r in rounds:
        if versions and versions[-1]["tag"] == r["tag"]:
            versions[-1]["last"] = r["name"]
        else:
            versions.append({"tag": r["tag"], "label": r["version"], "first": r["name"], "last": r["name"]})
    return {
        "version_marks": [
            {"x": round((rounds[i - 1]["x"] + r["x"]) / 2, 1), "version": r["version"], "tag": r["tag"]}
            for i, r in enumerate(rounds)
            if r["changed"] and i > 0
        ],
        "versions": versions,
        "revisions": [
            {"round": r["name"], "tag": r["tag"], "version": r["version"], "modes": r["revised"]}
            for r in rounds
            if r["revised"]
        ],
    }


def trend_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Coordinates for the SVG trend chart of agreement across rounds (rendered by a template).

    One slot per round, in the order the rounds were opened, named on the axis by the round's name
    (shortened to its slot, tilted when slots are narrow; the full name is in the tooltip and the
    key under the chart). Two series: failure-mode kappa (circles) and attribution agreement
    (diamonds); a round draws a point in each series it measured, so an attribution round never
    joins the failure-mode line. A round in review is provisional: a hollow dashed marker reached
    by a dashed segment, and the legend says so. Each version change is one dashed line with a
    short tag (V2, V3, ...) that the key spells out; values are written beside the points while
    they fit (12 rounds or fewer), and are always in each point's tooltip."""
    f = _Frame.of(rows)
    rounds, series = _trend_rounds(f, rows)
    ticks = []
    v = f.lo
    while v <= f.hi + 1e-9:
        ticks.append({"v": f"{v:.1f}", "y": round(f.y(v), 1)})
        v = round(v + 0.2, 10)
    bands = [
        {
            "y": round(f.y(b), 1),
            "h": round(f.y(a) - f.y(b), 1),
            "label": name,
            "ly": round((f.y(a) + f.y(b)) / 2 + 4, 1),
        }
        for a, b, name in ((0.6, 0.8, "substantial"), (0.8, 1.0, "almost perfect"))
    ]
    return {
        "width": f.width,
        "height": f.height,
        "left": f.left,
        "tick_x": f.left - 8,
        "plot_w": f.plot_w,
        "right": f.width - f.right,
        "top": f.top,
        "bottom": f.height - f.bottom,
        "label_y": f.height - f.bottom + 18,
        "tilted": f.tilted,
        "rounds": rounds,
        "points": [p for key, _, _ in SERIES for p in series[key]],
        # a round with no agreement to show (an imported round of decisions only) draws nothing:
        # with no such point at all the chart is left out rather than drawn empty
        "any_measured": any(p["y"] is not None for key, _, _ in SERIES for p in series[key]),
        "series": [
            {"key": key, "label": label, "what": what, "n": len(series[key])}
            for key, label, what in SERIES
            if series[key]
        ],
        "segments": _trend_segments(series),
        "any_provisional": any(r["provisional"] for r in rounds),
        "provisional_text": PROVISIONAL,
        "show_values": f.n <= 12,
        "ticks": ticks,
        "zero_y": round(f.y(0), 1) if f.lo < 0 else None,
        "bands": bands,
        **_trend_versions(rounds),
    }
