"""The paper table (framework x mode): the statistics, and the page, the downloads and the JSON API
carrying the same numbers."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from annotations.analytics import paper
from tests.annotations.analytics.test_analytics_dashboard import data  # noqa: F401 - the shared fixture

# ------------------------------------------------------------------ statistics (no database)


def test_wilson_matches_statsmodels_on_random_counts():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 400, size=200)
    k = rng.integers(0, n + 1)
    low, high = paper.wilson(k, n)
    ref_low, ref_high = proportion_confint(k, n, alpha=0.05, method="wilson")
    np.testing.assert_allclose(low, ref_low, atol=1e-12)
    np.testing.assert_allclose(high, ref_high, atol=1e-12)


def test_label_shares_sum_to_one_and_their_ci_covers_the_share():
    rng = np.random.default_rng(5)
    X = (rng.random((300, 14)) < rng.random(14)).astype(np.int64)
    r, low, high = paper.ratio_ci(X)
    assert r.sum() == pytest.approx(1.0)
    assert np.all(low <= r) and np.all(r <= high)


def test_label_share_ci_is_close_to_a_bootstrap_over_traces():
    rng = np.random.default_rng(11)
    X = (rng.random((400, 5)) < [0.1, 0.3, 0.5, 0.05, 0.2]).astype(np.int64)
    r, low, high = paper.ratio_ci(X)
    boot = []
    for _ in range(2000):
        s = X[rng.integers(0, len(X), len(X))]
        boot.append(s.sum(axis=0) / s.sum())
    b_low, b_high = np.percentile(boot, [2.5, 97.5], axis=0)
    np.testing.assert_allclose(low, b_low, atol=0.01)
    np.testing.assert_allclose(high, b_high, atol=0.01)


def test_a_framework_without_failures_has_undefined_label_shares():
    rows = paper.framework_mode_table(np.zeros((3, 2)), np.array(["AG2"] * 3, dtype=object))
    cell = rows[0].cells[0]
    assert cell.count == 0 and cell.share_traces == 0.0 and cell.share_labels is None
    assert rows[-1].framework == paper.ALL


def test_latex_escapes_framework_names():
    rows = paper.framework_mode_table(np.ones((2, 1)), np.array(["A&B_%", "A&B_%"], dtype=object))
    tex = paper.to_latex(rows, ["1.1"], {"1.1": "x"})
    assert r"A\&B\_\%" in tex and "\\toprule" in tex


# ------------------------------------------------------------------ page, downloads, API


def _page_cells(client, project, **params):
    from urllib.parse import urlencode

    resp = client.get(f"/p/{project.slug}/analytics/frameworks/?" + urlencode(params))
    assert resp.status_code == 200
    return {(c["framework"], mr["code"]): c for mr in resp.context["mode_rows"] for c in mr["cells"]}, resp


def test_page_api_and_csv_carry_the_same_numbers(client, project, viewer, data):  # noqa: F811
    client.force_login(viewer)
    cells, resp = _page_cells(client, project)
    assert 'data-framework="ChatDev" data-mode="1.3" data-count="3"' in resp.content.decode()
    api = client.get(f"/api/projects/{project.slug}/analytics/framework-modes/").json()
    from_csv = list(
        csv.DictReader(io.StringIO(client.get(f"/p/{project.slug}/analytics/frameworks/?format=csv").content.decode()))
    )
    assert len(api["rows"]) == len(from_csv) == len(cells) == 14 * 3  # ChatDev, MetaGPT <b>x</b>, All
    for row, line in zip(api["rows"], from_csv, strict=True):
        page = cells[(row["framework"], row["mode"])]
        assert row["count"] == page["count"] == int(line["count"])
        assert row["share_traces"] == pytest.approx(page["share"], abs=1e-12)
        assert row["share_traces"] == pytest.approx(float(line["share_traces"]), abs=1e-6)
        assert row["share_traces_ci"][0] == pytest.approx(page["low"], abs=1e-12)
        assert row["share_traces_ci"][0] == pytest.approx(float(line["share_traces_low"]), abs=1e-6)
    chatdev = {r["mode"]: r for r in api["rows"] if r["framework"] == "ChatDev"}
    assert chatdev["1.3"]["count"] == 3 and chatdev["1.3"]["share_traces"] == 1.0
    assert chatdev["1.3"]["share_labels"] == pytest.approx(0.5)  # 1.3 and 2.6 on each of its 3 traces


def test_label_share_view_matches_the_api(client, project, viewer, data):  # noqa: F811
    client.force_login(viewer)
    cells, _ = _page_cells(client, project, measure="labels")
    api = client.get(f"/api/projects/{project.slug}/analytics/framework-modes/").json()
    for row in api["rows"]:
        page = cells[(row["framework"], row["mode"])]
        if row["share_labels"] is None:
            assert page["share"] is None
        else:
            assert row["share_labels"] == pytest.approx(page["share"])
            assert row["share_labels_ci"][1] == pytest.approx(page["high"])


def test_latex_and_svg_downloads(client, project, viewer, data):  # noqa: F811
    client.force_login(viewer)
    tex = client.get(f"/p/{project.slug}/analytics/frameworks/?format=tex")
    assert tex["Content-Disposition"].endswith('.tex"')
    body = tex.content.decode()
    assert "3 (100.0\\%)" in body and "MetaGPT <b>x</b>" in body  # LaTeX needs no HTML escaping
    svg = client.get(f"/p/{project.slug}/analytics/frameworks/?format=svg").content.decode()
    ET.fromstring(svg)  # noqa: S314 - our own output; well-formed means "<b>x</b>" was escaped
    assert "&lt;b&gt;" in svg


def test_api_refuses_a_rater_the_user_may_not_see(client, project, annotator, data):  # noqa: F811
    client.force_login(annotator)
    resp = client.get(f"/api/projects/{project.slug}/analytics/framework-modes/?rater={data['judge'].pk}")
    assert resp.status_code == 400
    assert "rater" in resp.json()["errors"]


def test_page_query_count_is_pinned(client, project, manager, data, django_assert_num_queries):  # noqa: F811
    from django.core.cache import cache

    client.force_login(manager)
    client.get(f"/p/{project.slug}/analytics/frameworks/")
    cache.clear()
    # 14: + the version graph and the mappings' fingerprint (labels of other versions are mapped),
    # the closed rounds' order and versions in one read of the round rows, their bit layouts and
    # the AgreedMask rows (kept by triggers; no aggregate over adjudications)
    with django_assert_num_queries(15):  # +1: the traces blind for her (agreed labels leave them out)
        assert client.get(f"/p/{project.slug}/analytics/frameworks/").status_code == 200
