"""The importer's cheaper passes give the same results as the per-step definitions (issue 18)."""

from __future__ import annotations

import gc
import hashlib
import random

import pytest
from psycopg.types.json import Jsonb, JsonbBinaryDumper

from traces.importing.prep import _IGNORED, make_storable, repeated_steps, trace_stats
from traces.importing.results import TraceImportError
from traces.importing.service import _fewer_collections, traces_import
from traces.importing.writer import _dumps, _JsonbCopyDumper
from traces.parsers import ParsedStep, ParsedTrace


def _repeated_one_by_one(contents: list[str]) -> int:
    """The definition as it was written first: each step stripped and hashed on its own."""
    seen: set[bytes] = set()
    repeated = 0
    for text in contents:
        norm = text.encode("utf-8", "surrogatepass").translate(None, _IGNORED)
        if not norm:
            continue
        key = hashlib.blake2b(norm, digest_size=16).digest()
        repeated += key in seen
        seen.add(key)
    return repeated


_PIECES = ["hello", "Hello", " ", "\t", "\n", "42", "07:31", "é", "日本", "\ud800", "\x00", "", "```py\nx = 1\n```"]


@pytest.mark.parametrize("seed", range(40))
def test_repeated_steps_in_chunks_count_what_the_step_by_step_definition_counts(seed):
    rng = random.Random(seed)
    contents = ["".join(rng.choices(_PIECES, k=rng.randint(0, 4))) for _ in range(rng.randint(0, 60))]
    expected = _repeated_one_by_one(contents)
    for chunk_chars in (1, 7, 50, 4 * 1024**2):  # chunks of one step, of a few, and the whole trace
        assert repeated_steps(contents, chunk_chars=chunk_chars) == expected


def test_agents_and_switches_skip_steps_without_an_agent():
    agents = ["a", "", "a", "b", "", "b", "a", "c", ""]
    steps = [ParsedStep(i, name, "message", f"step {i}", i + 1, i + 1) for i, name in enumerate(agents)]
    stats = trace_stats(ParsedTrace(format="plaintext", raw_text="x", steps=steps))
    # a -> a -> b -> b -> a -> c: three switches; the steps without an agent are not counted
    assert (stats["agents"], stats["n_agents"], stats["n_agent_switches"]) == (["a", "b", "c"], 3, 3)
    assert stats["n_repeated_steps"] == 8  # "step 0" ... "step 8" differ in digits only


def test_a_lone_surrogate_only_in_an_agent_name_is_still_found_and_replaced():
    steps = [ParsedStep(0, "ok", "message", "hi", 1, 1), ParsedStep(1, "bad\ud800", "message", "there", 2, 2)]
    parsed = ParsedTrace(format="plaintext", raw_text="hi\nthere", steps=steps)
    assert make_storable(parsed) == b"hi\nthere"
    assert [st.agent for st in parsed.steps] == ["ok", "bad\ufffd"]


_REFERENCE = type("_Reference", (JsonbBinaryDumper,), {"_dumps": _dumps})  # what set_json_dumps builds


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"model": "gpt-4o", "input_tokens": 12, "timestamp": "2026-12-02T03:00:00Z"},
        {"é": ["ü", None, 1.5, True], "nested": {"a": {}}},
        {1: "a non-string key"},
        {"big": 2**70},  # orjson refuses it: the standard library writes it
        [],
        [{"a": 1}],
        Jsonb({"wrapped": 1}),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_copy_jsonb_dumper_writes_the_bytes_psycopgs_dumper_writes(value):
    assert _JsonbCopyDumper(dict).dump(value) == _REFERENCE(dict).dump(value)


@pytest.mark.django_db
def test_the_collector_runs_less_often_during_an_import_and_as_before_after_it(project, demo_data, tmp_path):
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    try:
        gc.set_threshold(700, 10, 10)  # CPython's default, whatever the test process had
        traces_import(
            project=project,
            paths_or_files=[demo_data / "openmanus"],
            progress=lambda p: seen.append(gc.get_threshold()),
        )
        assert seen
        assert all(t[0] >= 50_000 for t in seen)
        assert gc.get_threshold() == (700, 10, 10)

        empty = tmp_path / "empty.log"
        empty.write_text("")
        with pytest.raises(TraceImportError):  # a refused import sets them back too
            traces_import(project=project, paths_or_files=[empty])
        assert gc.get_threshold() == (700, 10, 10)

        gc.set_threshold(0)  # automatic collection switched off by the process: left off
        seen.clear()
        traces_import(
            project=project,
            paths_or_files=[demo_data / "openmanus"],
            progress=lambda p: seen.append(gc.get_threshold()),
        )
        assert {t[0] for t in seen} == {0}
    finally:
        gc.set_threshold(*before)


def test_overlapping_imports_set_the_thresholds_back_when_the_last_one_ends():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        first, second = _fewer_collections(), _fewer_collections()  # two imports, e.g. two threads
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)  # the first ends while the second still runs
        assert gc.get_threshold()[0] >= 50_000
        second.__exit__(None, None, None)
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
