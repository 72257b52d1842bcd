"""The MAST-Data array splitter: guessed record ends checked by the decoder (orjson, json fallback)."""

from __future__ import annotations

import io
import json

import pytest

from traces.parsers import ParseError, iter_mast_records
from traces.parsers.jsonload import loads, loads_complete


def _records(data: bytes) -> list:
    return list(iter_mast_records(io.BytesIO(data), filename="x.json"))


def test_record_ends_inside_strings_and_nested_lists_are_not_taken_for_record_ends() -> None:
    tricky = 'a}, {"b": 1}, {"c": [2]}]\n\t}\t,\t{"'
    items = [
        {
            "mas_name": "AG2",
            "trace_id": i,
            "trace": {"key": "k", "index": i, "trajectory": f"{i} {tricky * (i + 1)}"},
            "annotations": [{"failure mode": "1.1", "annotator_1": True}, {"failure mode": "1.2"}],
        }
        for i in range(6)
    ]
    for indent in (None, 1):
        records = _records(json.dumps(items, indent=indent).encode())
        assert [r.trajectory for r in records] == [it["trace"]["trajectory"] for it in items]
        assert [len(r.annotations) for r in records] == [2] * 6


def test_nan_label_falls_back_to_the_standard_library_and_reads_as_no_label() -> None:
    data = b'[{"mas_name": "AG2", "trace": "hello", "mast_annotation": {"1.1": NaN, "1.2": 1}},\n {"trace": "b"}]'
    records = _records(data)
    assert records[0].mast_annotation == {"1.1": None, "1.2": 1}
    assert records[1].trajectory == "b"


def test_lines_of_records_are_counted_across_the_fast_path() -> None:
    data = b'\n\n[\n{"trace": "a"},\n\n{"trace": "b"},\n 3\n]'
    with pytest.raises(ParseError) as err:
        _records(data)
    assert (err.value.record, err.value.line) == (2, 7)
    assert "record is a number, expected an object" in str(err.value)


def test_truncated_last_record_is_named() -> None:
    with pytest.raises(ParseError, match=r"record 2.*truncated JSON"):
        _records(b'[{"trace": "a"}, {"trace": "b}, {\\"c\\": 1}')


def test_loads_complete_refuses_a_slice_cut_short_and_reads_nan() -> None:
    assert loads_complete(b'{"a": "x}') == (False, None)
    assert loads_complete(b'{"a": [{"b": 1}') == (False, None)
    assert loads_complete(b'{"a": NaN}') == (True, {"a": None})
    assert loads('{"a": "\\ud800"}') == {"a": "\ud800"}  # kept for make_storable to replace and count
