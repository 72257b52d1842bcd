"""The dashboard's two caches: the traces' columns (keyed on the traces) and the labels (keyed on
the labels' stamp). A label change re-reads only labels; an import or a deletion re-reads the
traces; either way the page shows the new numbers."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotations.analytics import stats
from annotations.analytics.selectors import (
    dashboard_filter_choices,
    dashboard_trace_columns,
    label_matrix,
    project_trace_values,
)
from annotations.models import Adjudication
from tests.annotations.releases_factories import closed_round, make_trace
from traces.models import Trace

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def labelled(project, mast_version):
    traces = [
        make_trace(
            project,
            mas_name=["ChatDev", "MetaGPT", ""][i % 3],
            n_steps=5 + i,
            outcome=["success", "failure", ""][i % 3],
        )
        for i in range(6)
    ]
    rnd = closed_round(project, mast_version, {t: ({"1.3"} if i < 2 else {"2.6"}) for i, t in enumerate(traces)})
    return traces, rnd


def dashboard(client, project, **params):
    from urllib.parse import urlencode

    url = reverse("annotations:dashboard", kwargs={"slug": project.slug})
    return client.get(url + ("?" + urlencode(params) if params else ""))


def present_of(client, project, code: str) -> int:
    resp = dashboard(client, project, format="csv", chart="modes_failures")
    return int({r["mode"]: r for r in csv.DictReader(io.StringIO(resp.content.decode()))}[code]["present"])


def test_a_label_change_rereads_the_labels_and_not_the_traces(client, project, viewer, labelled, mast_version):
    traces, rnd = labelled
    client.force_login(viewer)
    assert present_of(client, project, "1.3") == 2
    adj = Adjudication.objects.get(round=rnd, trace=traces[5], mode__code="1.3")
    Adjudication.objects.filter(pk=adj.pk).update(decision="present")  # a decision: the stamp moves
    with CaptureQueriesContext(connection) as ctx:
        resp = dashboard(client, project)
    assert resp.context["summary"]["traces"] == 6
    trace_reads = [q["sql"] for q in ctx.captured_queries if '"traces_trace"' in q["sql"] and "STRING_AGG" in q["sql"]]
    assert trace_reads == []  # the traces' columns came from their cache
    assert present_of(client, project, "1.3") == 3


def test_a_new_trace_and_a_deleted_one_are_seen_by_the_cached_columns(client, project, viewer, labelled, mast_version):
    traces, _rnd = labelled
    client.force_login(viewer)
    assert dashboard(client, project).context["summary"]["traces"] == 6
    first = dashboard_trace_columns(project=project)
    new = make_trace(project, mas_name="AG2", n_steps=99)
    closed_round(project, mast_version, {new: {"1.3"}})
    after_import = dashboard_trace_columns(project=project)
    assert new.pk in after_import.ids.tolist() and new.pk not in first.ids.tolist()
    resp = dashboard(client, project)
    assert resp.context["summary"]["traces"] == 7
    assert "AG2" in [g[0] for g in resp.context["charts"]["frameworks_rate"].rows]
    traces[0].delete()
    assert traces[0].pk not in dashboard_trace_columns(project=project).ids.tolist()
    assert dashboard(client, project).context["summary"]["traces"] == 6


def test_cached_columns_equal_the_trace_rows(project, labelled):
    cols = dashboard_trace_columns(project=project)
    rows = list(
        Trace.objects.filter(project=project).order_by("id").values_list("id", "mas_name", "n_steps", "outcome")
    )
    assert cols.ids.tolist() == [r[0] for r in rows]
    assert cols.values["mas_name"][cols.codes["mas_name"]].tolist() == [r[1] for r in rows]
    assert cols.steps.tolist() == [float(r[2]) for r in rows]
    want = [{"success": 1.0, "failure": 0.0}.get(r[3], np.nan) for r in rows]
    assert np.array_equal(cols.success, np.array(want), equal_nan=True)
    filtered = dashboard_trace_columns(project=project, filters={"mas_name": ["MetaGPT"]})
    assert filtered.ids.tolist() == [r[0] for r in rows if r[1] == "MetaGPT"]


def test_a_selection_read_after_a_trace_edit_holds_the_new_framework(project, labelled):
    project_trace_values(project=project)  # cached with ChatDev, MetaGPT and ""
    Trace.objects.filter(pk=labelled[0][0].pk).update(mas_name="Magentic-One")  # count and last id unchanged
    cols = dashboard_trace_columns(project=project, filters={"llm_name": ["gpt-4o"]})  # not cached yet
    assert "Magentic-One" in cols.values["mas_name"][cols.codes["mas_name"]].tolist()


def test_an_edit_in_place_reaches_the_cached_columns_choices_and_page(client, project, viewer, labelled):
    """An admin's correction keeps the traces' count and highest id: the traces stamp (a trigger on
    UPDATE) moves the keys, so nothing cached before the edit is served after it."""
    traces, _rnd = labelled
    client.force_login(viewer)
    dashboard(client, project)  # caches the columns, the filter choices and the page's figures
    before = dashboard_trace_columns(project=project)
    assert "Magentic-One" not in before.values["mas_name"].tolist()
    for t in traces[:2]:
        t.mas_name, t.outcome = "Magentic-One", "failure"
        t.save(update_fields=["mas_name", "outcome"])  # as the admin's change form saves
    cols = dashboard_trace_columns(project=project)
    names = cols.values["mas_name"][cols.codes["mas_name"]].tolist()
    assert names[:2] == ["Magentic-One", "Magentic-One"]
    assert cols.success[:2].tolist() == [0.0, 0.0]
    assert "Magentic-One" in dashboard_filter_choices(project=project)["mas_name"]
    resp = dashboard(client, project)
    assert "Magentic-One" in [g[0] for g in resp.context["charts"]["frameworks_rate"].rows]


def test_filter_choices_equal_the_distinct_values(project, labelled):
    make_trace(project, mas_name="AG2", llm_name="", benchmark="GAIA")
    choices = dashboard_filter_choices(project=project)
    for f in ("mas_name", "llm_name", "benchmark"):
        distinct = set(Trace.objects.filter(project=project).values_list(f, flat=True))
        assert choices[f] == sorted(v for v in distinct if v)


def test_the_cached_matrix_comes_back_equal(project, viewer, labelled):
    M = label_matrix(user=viewer, project=project)
    cache.set("test:matrix", M)  # the cache pickles (LocMem, Redis)
    back = cache.get("test:matrix")
    assert back is not M
    assert np.array_equal(back.X, M.X, equal_nan=True) and back.X.dtype == M.X.dtype
    assert back.mas_name.tolist() == M.mas_name.tolist() == ["ChatDev", "MetaGPT", "", "ChatDev", "MetaGPT", ""]
    assert np.array_equal(back.success, M.success, equal_nan=True)


def test_groups_give_what_the_strings_give():
    rng = np.random.default_rng(7)
    names = np.array(["ChatDev", "", "AG2", "MetaGPT", "Zeta"])
    rows = names[rng.integers(0, 4, 500)]  # "Zeta" never used
    X = np.where(rng.random((500, 6)) < 0.2, np.nan, (rng.random((500, 6)) < 0.3).astype(float))
    values, codes = np.unique(np.append(rows, "Zeta"), return_inverse=True)
    groups = stats.Groups(values, codes[:-1])
    cats, colcats = ["1", "2"], ["1", "1", "1", "2", "2", "2"]
    assert stats.per_group(X, groups, colcats, cats) == stats.per_group(X, rows, colcats, cats)
    steps = rng.integers(1, 50, 500).astype(float)
    success = np.where(rng.random(500) < 0.3, np.nan, 1.0)
    failed = np.any(X == 1, axis=1).astype(float)
    a = stats.efficiency(groups, steps, steps, steps, failed, success)
    b = stats.efficiency(rows, steps, steps, steps, failed, success)
    assert a == b
    assert np.array_equal(groups.equals("AG2"), rows == "AG2")
    assert not groups.equals("Zeta").any() and not groups.equals("nope").any()


def test_mask_bits_are_the_masks_bits():
    from annotations.analytics.selectors import mask_bits

    rng = np.random.default_rng(3)
    masks = rng.integers(0, 2**63, 200, dtype=np.uint64) | np.uint64(2**63) * (rng.random(200) < 0.5).astype(np.uint64)
    for m in (1, 14, 33, 64):
        want = np.array([[(int(v) >> j) & 1 for j in range(m)] for v in masks], dtype=np.uint8)
        assert np.array_equal(mask_bits(masks, m), want)
    assert mask_bits(np.zeros(0, dtype=np.uint64), 14).shape == (0, 14)
