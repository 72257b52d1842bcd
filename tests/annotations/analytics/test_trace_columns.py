"""``trace_columns`` (the dashboard's one-row read of every trace's columns) gives what the rows
give, in id order, and falls back to the rows when a value holds its separator."""

from __future__ import annotations

import numpy as np
import pytest

from annotations.analytics.selectors import SEP, trace_columns
from tests.annotations.releases_factories import make_trace
from traces.models import Trace

pytestmark = pytest.mark.django_db

FIELDS = {"id": int, "mas_name": str, "n_steps": float, "outcome": str}


def rows_of(project) -> dict[str, list]:
    rows = list(Trace.objects.filter(project=project).order_by("id").values_list(*FIELDS))
    return {f: [r[i] for r in rows] for i, f in enumerate(FIELDS)}


def test_columns_equal_the_rows_in_id_order(project):
    for i, name in enumerate(["ChatDev", "", "AG2", "Magentic One", "ChatDev"]):
        make_trace(project, mas_name=name, n_steps=i * 3, outcome=["success", "", "failure"][i % 3])
    Trace.objects.filter(pk=Trace.objects.filter(project=project).order_by("id").first().pk).update(mas_name="AG2")
    cols = trace_columns(Trace.objects.filter(project=project), FIELDS)
    expected = rows_of(project)
    assert cols["id"].tolist() == expected["id"]
    assert cols["mas_name"].tolist() == expected["mas_name"]
    assert cols["n_steps"].tolist() == [float(v) for v in expected["n_steps"]]
    assert cols["outcome"].tolist() == expected["outcome"]
    assert cols["mas_name"].dtype.kind == "U"  # one buffer to pickle, not 100,000 objects


def test_a_value_holding_the_separator_is_read_whole(project):
    make_trace(project, mas_name="A")
    make_trace(project, mas_name=f"B{SEP}C")  # from an import: nothing forbids it
    cols = trace_columns(Trace.objects.filter(project=project), FIELDS)
    assert cols["mas_name"].tolist() == ["A", f"B{SEP}C"]


def test_no_rows_give_empty_columns(project):
    cols = trace_columns(Trace.objects.filter(project=project), FIELDS)
    assert all(len(v) == 0 for v in cols.values())
    assert cols["id"].dtype == np.int64


def test_coded_columns_give_the_strings_in_id_order(project):
    from annotations.analytics.selectors import CODED

    names = ["ChatDev", "", "AG2", "Magentic One", "ChatDev", f"B{SEP}C"]
    for name in names:
        make_trace(project, mas_name=name)
    for kept in (names[:-1], names):  # the last one holds the separator: read from the rows
        qs = Trace.objects.filter(project=project, mas_name__in=kept)
        values, codes = trace_columns(qs, {"id": int, "mas_name": CODED})["mas_name"]
        assert values.tolist() == sorted(set(kept))
        assert values[codes].tolist() == list(qs.order_by("id").values_list("mas_name", flat=True))
        assert codes.dtype == np.int32
