"""Server-rendered SVG charts (pure; every piece of text is XML-escaped).

Horizontal bars (long mode names stay readable), grouped horizontal bars with a legend,
heat-maps with a diverging scale, all in the Okabe-Ito colour-blind-safe palette. Sizes are
computed from the data so labels never overlap: one row per bar, rows grow with the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

# Okabe & Ito (2008), safe for the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
INK = "#1f2430"
MUTED = "#5b6170"
GRID = "#e3e6ec"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
CHAR_W = 6.4  # average glyph width at 12px, for layout


def _e(text: object) -> str:
    return escape(str(text), {'"': "&quot;"})


def _text_width(text: str, size: float = 12) -> float:
    return len(text) * CHAR_W * size / 12


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def pct(v: float) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


def num(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.1f}"


def _nice_step(v: float, n: int = 7) -> float:
    raw = v / n
    exp = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= raw:
            return m * exp
    return 10 * exp


def _nice_max(v: float) -> float:
    """A round axis maximum at or above v (ticks at multiples of a 1/2/2.5/5 step)."""
    if v <= 0 or math.isnan(v):
        return 1.0
    step = _nice_step(v)
    return math.ceil(v / step - 1e-9) * step


def _ticks(vmax: float, n: int = 7) -> list[float]:
    step = _nice_step(vmax, n)
    count = int(round(vmax / step))
    return [step * i for i in range(count + 1)]


def _svg(width: float, height: float, title: str, body: list[str], desc: str = "") -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" font-family="{_e(FONT)}" font-size="12" fill="{INK}">'
        f"<title>{_e(title)}</title>"
        + (f"<desc>{_e(desc)}</desc>" if desc else "")
        + '<rect width="100%" height="100%" fill="#ffffff"/>'
        + "".join(body)
        + "</svg>"
    )


def _legend(items: Sequence[tuple[str, str]], x: float, y: float, max_x: float) -> tuple[list[str], float]:
    """Legend laid out left to right, wrapping before max_x; returns parts and its height."""
    parts, cx, cy = [], x, y
    for name, colour in items:
        w = 18 + _text_width(name) + 18
        if cx + w > max_x and cx > x:
            cx, cy = x, cy + 18
        parts.append(f'<rect x="{cx:.1f}" y="{cy - 9:.1f}" width="11" height="11" rx="2" fill="{colour}"/>')
        parts.append(f'<text x="{cx + 16:.1f}" y="{cy:.1f}">{_e(name)}</text>')
        cx += w
    return parts, cy - y + 18


def bar_chart(
    rows: Sequence[tuple[str, float]],
    *,
    title: str,
    x_label: str,
    fmt: Callable[[float], str] = pct,
    colour: str = PALETTE[0],
    colours: Sequence[str] | None = None,
    width: int = 640,
    max_value: float | None = None,
    legend: Sequence[tuple[str, str]] | None = None,
) -> str:
    """Horizontal bars, one row per (label, value); value printed at the end of each bar."""
    labels = [_truncate(label, 44) for label, _ in rows]
    left = 16 + max([_text_width(t) for t in labels] + [60])
    right, top, row_h = 64, 44, 24
    legend_parts: list[str] = []
    if legend:
        legend_parts, legend_h = _legend(legend, 16, 44, width - 8)
        top += legend_h + 4
    plot_w = max(width - left - right, 160)
    finite = [v for _, v in rows if v is not None and not math.isnan(v)]
    vmax = max_value if max_value is not None else _nice_max(max(finite) if finite else 0)
    height = top + row_h * max(len(rows), 1) + 46
    body = [f'<text x="16" y="22" font-size="14" font-weight="600">{_e(title)}</text>', *legend_parts]
    for t in _ticks(vmax):
        x = left + plot_w * t / vmax
        body.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 42}" stroke="{GRID}"/>')
        body.append(
            f'<text x="{x:.1f}" y="{height - 28}" text-anchor="middle" fill="{MUTED}" font-size="11">'
            f"{_e(fmt(t).replace('.0%', '%'))}</text>"
        )
    for i, ((_, v), label) in enumerate(zip(rows, labels, strict=True)):
        y = top + i * row_h
        val = 0.0 if v is None or math.isnan(v) else v
        w = plot_w * min(val, vmax) / vmax
        c = colours[i % len(colours)] if colours else colour
        body.append(f'<text x="{left - 8:.1f}" y="{y + 15}" text-anchor="end">{_e(label)}</text>')
        body.append(
            f'<rect x="{left:.1f}" y="{y + 4}" width="{max(w, 0):.1f}" height="{row_h - 8}" rx="2" fill="{c}"/>'
        )
        body.append(f'<text x="{left + w + 5:.1f}" y="{y + 15}" fill="{MUTED}" font-size="11">{_e(fmt(v))}</text>')
    if not rows:
        body.append(f'<text x="{left}" y="{top + 16}" fill="{MUTED}">No labelled traces for this selection.</text>')
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="{MUTED}">{_e(x_label)}</text>'
    )
    return _svg(width, height, title, body)


def grouped_bars(
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    x_label: str,
    fmt: Callable[[float], str] = num,
    width: int = 640,
    markers: Sequence[str] | None = None,
    max_value: float | None = None,
) -> str:
    """For each group, one bar per series (legend on top); optional marker text per group."""
    labels = [_truncate(g, 40) for g in groups]
    left = 16 + max([_text_width(t) for t in labels] + [60])
    right = 80
    plot_w = max(width - left - right, 160)
    legend, legend_h = _legend(
        [(name, PALETTE[i % len(PALETTE)]) for i, (name, _) in enumerate(series)], 16, 44, width - 8
    )
    top = 44 + legend_h + 6
    bar_h = 13 if len(series) > 2 else 15
    group_h = bar_h * len(series) + 12
    height = top + group_h * max(len(groups), 1) + 46
    finite = [v for _, vs in series for v in vs if v is not None and not math.isnan(v)]
    vmax = max_value if max_value is not None else _nice_max(max(finite) if finite else 0)
    body = [f'<text x="16" y="22" font-size="14" font-weight="600">{_e(title)}</text>', *legend]
    for t in _ticks(vmax):
        x = left + plot_w * t / vmax
        body.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 42}" stroke="{GRID}"/>')
        body.append(
            f'<text x="{x:.1f}" y="{height - 28}" text-anchor="middle" fill="{MUTED}" font-size="11">'
            f"{_e(fmt(t).replace('.0%', '%'))}</text>"
        )
    for gi, label in enumerate(labels):
        y0 = top + gi * group_h
        body.append(
            f'<text x="{left - 8:.1f}" y="{y0 + (group_h - 12) / 2 + 4:.1f}" text-anchor="end">{_e(label)}</text>'
        )
        for si, (_, values) in enumerate(series):
            v = values[gi]
            val = 0.0 if v is None or math.isnan(v) else v
            w = plot_w * min(val, vmax) / vmax
            y = y0 + si * bar_h
            body.append(
                f'<rect x="{left:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{bar_h - 2}" rx="1.5" '
                f'fill="{PALETTE[si % len(PALETTE)]}"/>'
            )
            body.append(
                f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 4:.1f}" fill="{MUTED}" font-size="10">'
                f"{_e(fmt(v))}</text>"
            )
        if markers and markers[gi]:
            body.append(
                f'<text x="{width - 12:.1f}" y="{y0 + (group_h - 12) / 2 + 5:.1f}" text-anchor="end" '
                f'font-weight="700" fill="{PALETTE[5]}">{_e(markers[gi])}</text>'
            )
    if not groups:
        body.append(f'<text x="{left}" y="{top + 16}" fill="{MUTED}">No labelled traces for this selection.</text>')
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="{MUTED}">{_e(x_label)}</text>'
    )
    return _svg(width, height, title, body)


def _diverging(v: float) -> str:
    """Blue (negative) - white - orange (positive), colour-blind safe; grey for undefined."""
    if v is None or math.isnan(v):
        return "#f1f2f5"
    v = max(-1.0, min(1.0, v))
    end = (0x00, 0x72, 0xB2) if v < 0 else (0xD5, 0x5E, 0x00)
    t = abs(v) ** 0.8
    r, g, b = (round(255 + (e - 255) * t) for e in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    labels: Sequence[str],
    matrix: Sequence[Sequence[float]],
    *,
    title: str,
    legend_label: str = "phi correlation",
    row_names: Sequence[str] | None = None,
) -> str:
    """Square heat-map with the value in each cell, codes on both axes and a colour scale."""
    k = len(labels)
    names = [_truncate(n, 34) for n in (row_names or labels)]
    cell = 40 if k <= 6 else 34 if k <= 12 else 30
    left = 16 + max([_text_width(n) for n in names] + [40])
    top = 44 + 26
    size = cell * max(k, 1)
    legend_text = f"{legend_label} (grey: undefined, e.g. a mode never or always present)"
    width = max(left + size + 110, _text_width(legend_text) + 40, 420)
    height = top + size + 54
    body = [f'<text x="16" y="22" font-size="14" font-weight="600">{_e(title)}</text>']
    for j, lab in enumerate(labels):
        x = left + j * cell + cell / 2
        body.append(f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" font-size="11">{_e(lab)}</text>')
    for i in range(k):
        y = top + i * cell
        body.append(f'<text x="{left - 8:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor="end">{_e(names[i])}</text>')
        for j in range(k):
            v = matrix[i][j]
            x = left + j * cell
            fill = _diverging(v)
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell - 1}" height="{cell - 1}" fill="{fill}">'
                f"<title>{_e(labels[i])} × {_e(labels[j])}: {_e(_corr(v))}</title></rect>"
            )
            if i != j:
                dark = v is not None and not math.isnan(v) and abs(v) > 0.55
                body.append(
                    f'<text x="{x + cell / 2 - 0.5:.1f}" y="{y + cell / 2 + 3.5:.1f}" text-anchor="middle" '
                    f'font-size="{9.5 if cell < 34 else 10.5}" fill="{"#ffffff" if dark else INK}">'
                    f"{_e(_corr(v, short=True))}</text>"
                )
    # colour scale
    sx, sy, sh = left + size + 28, top, size
    steps = 20
    for s in range(steps):
        v = 1 - 2 * s / (steps - 1)
        body.append(
            f'<rect x="{sx}" y="{sy + s * sh / steps:.1f}" width="14" height="{sh / steps + 0.5:.1f}" '
            f'fill="{_diverging(v)}"/>'
        )
    for label, yy in (("+1", sy + 4), ("0", sy + sh / 2 + 4), ("−1", sy + sh)):
        body.append(f'<text x="{sx + 20}" y="{yy:.1f}" font-size="11" fill="{MUTED}">{label}</text>')
    body.append(f'<text x="16" y="{height - 14}" fill="{MUTED}">{_e(legend_text)}</text>')
    return _svg(width, height, title, body)


def _corr(v: float, short: bool = False) -> str:
    if v is None or math.isnan(v):
        return "–" if short else "undefined"
    s = f"{v:.2f}"
    return s.replace("0.", ".", 1) if short else s


def line_chart(
    periods: Sequence[str],
    series: Sequence[tuple[str, Sequence[tuple[float | None, float | None, float | None]]]],
    *,
    title: str,
    y_label: str,
    width: int = 1180,
    height: int = 340,
    marks: Sequence[tuple[str, str]] = (),
) -> str:
    """Shares over time: per series a line through (value) with its 95% interval as a band of
    (low, high), periods on x; a gap where a period has no value. ``marks``: (period, text) drawn as a
    dashed vertical line (an alert that fired)."""
    legend, legend_h = _legend(
        [(name, PALETTE[i % len(PALETTE)]) for i, (name, _) in enumerate(series)], 16, 44, width - 8
    )
    top, left, right, bottom = 44 + legend_h + 8, 56, 24, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    highs = [h for _, pts in series for _, _, h in pts if h is not None] + [
        v for _, pts in series for v, _, _ in pts if v is not None
    ]
    vmax = min(1.0, _nice_max(max(highs))) if highs else 1.0
    n = max(len(periods), 1)

    def x(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / vmax)

    body = [f'<text x="16" y="22" font-size="14" font-weight="600">{_e(title)}</text>', *legend]
    for t in _ticks(vmax, 5):
        body.append(f'<line x1="{left}" y1="{y(t):.1f}" x2="{left + plot_w}" y2="{y(t):.1f}" stroke="{GRID}"/>')
        body.append(
            f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end" fill="{MUTED}" font-size="11">'
            f"{_e(pct(t))}</text>"
        )
    step = max(1, math.ceil(n / max(1, plot_w // 70)))
    for i, label in enumerate(periods):
        if i % step == 0:
            body.append(
                f'<text x="{x(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="{MUTED}" font-size="11">'
                f"{_e(label)}</text>"
            )
    at = {p: i for i, p in enumerate(periods)}
    for period, text in marks:
        if period in at:
            mx = x(at[period])
            body.append(f'<line x1="{mx:.1f}" y1="{top}" x2="{mx:.1f}" y2="{top + plot_h}" stroke="{PALETTE[5]}" '
                        'stroke-dasharray="4 3"/>')  # fmt: skip
            anchor, tx = ("end", mx - 4) if mx > left + plot_w * 0.8 else ("start", mx + 4)
            body.append(f'<text x="{tx:.1f}" y="{top + 12}" text-anchor="{anchor}" fill="{PALETTE[5]}" '
                        f'font-size="11">{_e(text)}</text>')  # fmt: skip
    for si, (_, pts) in enumerate(series):
        colour = PALETTE[si % len(PALETTE)]
        runs: list[list[int]] = [[]]
        for i, (v, _, _) in enumerate(pts):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(i)
        for run in (r for r in runs if r):
            band = [(i, pts[i][1], pts[i][2]) for i in run if pts[i][1] is not None and pts[i][2] is not None]
            if len(band) > 1:
                upper = " ".join(f"{x(i):.1f},{y(h):.1f}" for i, _, h in band)
                lower = " ".join(f"{x(i):.1f},{y(lo):.1f}" for i, lo, _ in reversed(band))
                body.append(f'<polygon points="{upper} {lower}" fill="{colour}" fill-opacity="0.1"/>')
            line = " ".join(f"{x(i):.1f},{y(pts[i][0]):.1f}" for i in run)  # type: ignore[arg-type]
            body.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for i in run:
                body.append(f'<circle cx="{x(i):.1f}" cy="{y(pts[i][0]):.1f}" r="3" fill="{colour}"/>')  # type: ignore[arg-type]
    if not periods:
        body.append(f'<text x="{left}" y="{top + 20}" fill="{MUTED}">No labelled traces for this selection.</text>')
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="{MUTED}">{_e(y_label)}</text>'
    )
    return _svg(width, height, title, body)
