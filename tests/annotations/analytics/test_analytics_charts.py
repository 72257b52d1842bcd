"""The pure SVG charts: valid XML, escaped text, one row per label (no overlaps), readable scales."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from annotations.analytics import charts

NS = "{http://www.w3.org/2000/svg}"
EVIL = '<script>alert("x")</script> & "quotes"'


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - our own output


def texts(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{NS}text"))


def test_bar_chart_escapes_labels_and_is_valid_svg():
    svg = charts.bar_chart([(EVIL, 0.5), ("ok", 0.25)], title=EVIL, x_label="%")
    assert "<script>" not in svg
    root = parse(svg)
    assert any(t.text == EVIL[:43] + "…" or t.text == EVIL for t in texts(root))


def test_bar_labels_never_overlap_vertically():
    rows = [(f"FM-{i} a long failure mode name number {i}", i / 20) for i in range(14)]
    root = parse(charts.bar_chart(rows, title="t", x_label="x"))
    ys = sorted(float(t.get("y")) for t in texts(root) if t.get("text-anchor") == "end")
    assert len(ys) == 14
    assert min(b - a for a, b in zip(ys, ys[1:], strict=False)) >= 14  # 12px text


def test_grouped_bars_have_a_legend_entry_per_series():
    svg = charts.grouped_bars(["A", "B"], [("Steps", [3.0, 4.0]), ("Switches", [1.0, 2.0])], title="t", x_label="x")
    labels = [t.text for t in texts(parse(svg))]
    assert "Steps" in labels and "Switches" in labels


def test_heatmap_prints_values_and_marks_undefined_cells():
    nan = float("nan")
    svg = charts.heatmap(["1.1", "1.2"], [[1.0, -0.25], [-0.25, nan]], title="phi")
    labels = [t.text for t in texts(parse(svg))]
    assert "-.25" in labels
    assert "#f1f2f5" in svg  # grey for undefined


def test_axis_ticks_are_round_numbers():
    svg = charts.bar_chart([("a", 0.337)], title="t", x_label="x")
    ticks = re.findall(r'font-size="11">([0-9.]+%)</text>', svg)
    assert ticks[:3] == ["0%", "5%", "10%"]


def test_diverging_palette_is_symmetric_and_white_at_zero():
    assert charts._diverging(0.0) == "#ffffff"
    assert charts._diverging(1.0) != charts._diverging(-1.0)
    assert charts._diverging(math.nan) == "#f1f2f5"
