"""The paper table: failure modes per framework, in one view across all frameworks (pure numpy).

For every framework (``mas_name``) and for all frameworks together, and every mode:

- ``count``: traces of the framework whose labels mark the mode present;
- ``share_traces`` ("normalised per trace"): count / traces of the framework, the mode's
  prevalence, with a **Wilson** 95% score interval (traces are the independent units);
- ``share_labels`` ("normalised per framework"): count / all present labels of the framework, the
  mode's part of that framework's failures (the MAST paper's per-framework bars sum to 1), with a
  95% interval from the **linearised ratio estimator with traces as clusters** (a trace's labels
  are not independent of each other, so a binomial interval over labels would be too narrow).
  Undefined (None) where the framework has no present label.

Writers turn the same rows into CSV (long format), LaTeX (booktabs) and SVG, so every download and
the JSON API carry the very numbers the page shows.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotations.analytics.charts import MUTED, _e, _svg, _text_width
from traces.csv_cells import csv_writer

Z95 = 1.959963984540054
ALL = "All frameworks"


def wilson(k: np.ndarray, n: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes of n (elementwise; NaN where n == 0)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def ratio_ci(X: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Share of each column in all present labels, with a cluster (trace) linearised 95% CI.

    r_m = sum_i X_im / sum_i z_i, z_i = present labels of trace i;
    Var(r_m) ~ sum_i (X_im - r_m z_i)^2 / (n (n - 1) zbar^2). NaN where no label is present."""
    n = X.shape[0]
    zrow = X.sum(axis=1).astype(float)
    total = zrow.sum()
    if n == 0 or total == 0:
        nan = np.full(X.shape[1], np.nan)
        return nan, nan, nan
    r = X.sum(axis=0) / total
    if n < 2:
        return r, np.full_like(r, np.nan), np.full_like(r, np.nan)
    resid = X - np.outer(zrow, r)
    var = (resid**2).sum(axis=0) / (n * (n - 1) * (total / n) ** 2)
    half = z * np.sqrt(var)
    return r, np.clip(r - half, 0, 1), np.clip(r + half, 0, 1)


@dataclass(frozen=True)
class Cell:
    count: int
    share_traces: float
    traces_low: float
    traces_high: float
    share_labels: float | None
    labels_low: float | None
    labels_high: float | None


@dataclass(frozen=True)
class Row:
    framework: str
    n_traces: int
    n_labels: int
    cells: tuple[Cell, ...]


def _opt(v: float) -> float | None:
    return None if math.isnan(v) else float(v)


def _row(name: str, X: np.ndarray) -> Row:
    n = X.shape[0]
    counts = X.sum(axis=0).astype(int)
    lo, hi = wilson(counts, np.full(counts.shape, n))
    r, rlo, rhi = ratio_ci(X)
    cells = tuple(
        Cell(
            count=int(counts[m]),
            share_traces=float(counts[m] / n) if n else float("nan"),
            traces_low=float(lo[m]),
            traces_high=float(hi[m]),
            share_labels=_opt(r[m]),
            labels_low=_opt(rlo[m]),
            labels_high=_opt(rhi[m]),
        )
        for m in range(X.shape[1])
    )
    return Row(framework=name, n_traces=n, n_labels=int(counts.sum()), cells=cells)


def framework_mode_table(X: np.ndarray, frameworks: np.ndarray) -> list[Row]:
    """One row per framework (alphabetical; traces without one as "unknown"), then all of them.

    ``X`` is the trace x mode 0/1 matrix (NaN = not labelled counts as absent only where a trace
    has some label; callers pass the agreed/rater matrix of the analytics selectors)."""
    P = np.nan_to_num(X, nan=0.0) > 0.5
    P = P.astype(np.int64)
    names = np.array([f or "unknown" for f in frameworks], dtype=object)
    rows = [_row(str(f), P[names == f]) for f in sorted(set(names.tolist()))]
    rows.append(_row(ALL, P))
    return rows


def pct(v: float | None, digits: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.{digits}f}%"


def rows_as_dicts(rows: Sequence[Row], codes: Sequence[str], names: dict[str, str]) -> list[dict]:
    """The JSON shape (API) and the CSV rows: one dict per (framework, mode)."""
    out = []
    for row in rows:
        for code, c in zip(codes, row.cells, strict=True):
            out.append(
                {
                    "framework": row.framework,
                    "mode": code,
                    "mode_name": names.get(code, ""),
                    "n_traces": row.n_traces,
                    "count": c.count,
                    "share_traces": _opt(c.share_traces),
                    "share_traces_ci": [_opt(c.traces_low), _opt(c.traces_high)],
                    "share_labels": c.share_labels,
                    "share_labels_ci": [c.labels_low, c.labels_high],
                }
            )
    return out


CSV_COLUMNS = [
    "framework", "mode", "mode_name", "n_traces", "count",
    "share_traces", "share_traces_low", "share_traces_high",
    "share_labels", "share_labels_low", "share_labels_high",
]  # fmt: skip


def to_csv(rows: Sequence[Row], codes: Sequence[str], names: dict[str, str]) -> str:
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for d in rows_as_dicts(rows, codes, names):
        w.writerow(
            [d["framework"], d["mode"], d["mode_name"], d["n_traces"], d["count"]]
            + [_fmt(v) for v in (d["share_traces"], *d["share_traces_ci"], d["share_labels"], *d["share_labels_ci"])]
        )
    return buf.getvalue()


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6f}"


_TEX = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "\\": r"\textbackslash{}",
}  # noqa: E501


def tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(rows: Sequence[Row], codes: Sequence[str], names: dict[str, str], *, measure: str = "traces") -> str:
    """A booktabs table, modes down, frameworks across: "count (share)" per cell, the 95% CI below."""
    key = "share_traces" if measure == "traces" else "share_labels"
    caption = (
        "Traces showing each failure mode, per framework: count (share of the framework's traces), "
        "Wilson 95\\% CI below."
        if measure == "traces"
        else "Each failure mode's share of the framework's failure labels (count, share), 95\\% CI "
        "(linearised ratio estimator, traces as clusters) below."
    )
    cols = "l" + "r" * len(rows)
    lines = [
        "% Generated by MAST Studio; needs \\usepackage{booktabs}",
        "\\begin{table}[t]",
        "\\centering\\small",
        f"\\caption{{{caption}}}",
        f"\\begin{{tabular}}{{{cols}}}",
        "\\toprule",
        "Mode & " + " & ".join(f"{tex(r.framework)} ($n={r.n_traces}$)" for r in rows) + " \\\\",
        "\\midrule",
    ]
    for m, code in enumerate(codes):
        top, ci = [], []
        for r in rows:
            c = r.cells[m]
            share = c.share_traces if key == "share_traces" else c.share_labels
            low, high = (c.traces_low, c.traces_high) if key == "share_traces" else (c.labels_low, c.labels_high)
            top.append(f"{c.count} ({tex(pct(share))})")
            ci.append(f"\\scriptsize [{tex(pct(low))}, {tex(pct(high))}]" if low is not None else "")
        lines.append(f"{tex(code)} {tex(names.get(code, ''))} & " + " & ".join(top) + " \\\\")
        lines.append(" & " + " & ".join(ci) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


def _blue(v: float | None) -> str:
    """Sequential white -> blue for a share in [0, 1]; grey where undefined."""
    if v is None or math.isnan(v):
        return "#eeeeee"
    t = max(0.0, min(1.0, v))
    r, g, b = (int(255 + (c - 255) * t) for c in (0x08, 0x45, 0x94))
    return f"#{r:02x}{g:02x}{b:02x}"


def to_svg(rows: Sequence[Row], codes: Sequence[str], *, measure: str = "traces") -> str:
    """Frameworks down, modes across, each cell the share (colour) and the count."""

    cw, ch = 54, 30
    left = 24 + max([_text_width(f"{r.framework} (n={r.n_traces})") for r in rows] + [60])
    top = 66
    width = left + cw * len(codes) + 24
    height = top + ch * len(rows) + 48
    what = "share of the framework's traces" if measure == "traces" else "share of the framework's failure labels"
    title = f"Failure modes per framework ({what})"
    body = [f'<text x="16" y="24" font-size="14" font-weight="600">{_e(title)}</text>']
    for j, code in enumerate(codes):
        x = left + j * cw + cw / 2
        body.append(f'<text x="{x:.1f}" y="{top - 10}" text-anchor="middle" font-size="11">{_e(code)}</text>')
    for i, row in enumerate(rows):
        y = top + i * ch
        label = f"{row.framework} (n={row.n_traces})"
        weight = ' font-weight="600"' if row.framework == ALL else ""
        body.append(f'<text x="{left - 8:.1f}" y="{y + ch / 2 + 4:.1f}" text-anchor="end"{weight}>{_e(label)}</text>')
        for j, c in enumerate(row.cells):
            v = c.share_traces if measure == "traces" else c.share_labels
            x = left + j * cw
            dark = v is not None and not math.isnan(v) and v > 0.45
            body.append(
                f'<rect x="{x}" y="{y}" width="{cw - 1}" height="{ch - 1}" fill="{_blue(v)}">'
                f"<title>{_e(row.framework)} · {_e(codes[j])}: {c.count} ({_e(pct(v))})</title></rect>"
                f'<text x="{x + cw / 2:.1f}" y="{y + ch / 2 + 4:.1f}" text-anchor="middle" font-size="10.5" '
                f'fill="{"#ffffff" if dark else "#1f2430"}">{_e(pct(v, 0))}</text>'
            )
    ci = "Wilson 95% CI" if measure == "traces" else "95% CI, traces as clusters"
    body.append(
        f'<text x="16" y="{height - 16}" fill="{MUTED}">{_e(f"Cell: share ({ci} in the CSV and LaTeX)")}</text>'
    )
    return _svg(width, height, title, body)
