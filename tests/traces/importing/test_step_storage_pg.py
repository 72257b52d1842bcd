"""How PostgreSQL stores traces and steps: lz4 for the large values, one index by trace on steps."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

LZ4_COLUMNS = [
    ("traces_trace", "raw_text"),
    ("traces_step", "content"),
    ("traces_trace", "task"),
    ("traces_trace", "metadata"),
    ("traces_step", "details"),
    ("traces_importjob", "report"),
]


def _postgres_with_lz4() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize(("table", "column"), LZ4_COLUMNS)
def test_large_values_are_compressed_with_lz4(table, column):
    if not _postgres_with_lz4():
        pytest.fail("these tests need PostgreSQL 14+ built with lz4 (the suite's server is)")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s", [table, column]
        )
        assert cursor.fetchone() == ("l",)


def test_steps_have_one_index_leading_with_the_trace():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'traces_step'")
        by_trace = [name for name, sql in cursor.fetchall() if "(trace_id" in sql]
    # and the corpus search's partial index of the steps waiting for its indexer (traces/search/):
    # an import's steps pass through it once (bench/bench_corpus.py measures the import with it)
    assert sorted(by_trace) == ["step_unique_index", "step_waiting_search"]


def test_steps_hold_no_foreign_key_and_go_with_their_trace(project):
    """No constraint checks each imported step against its trace (traces migration 0022); a trace
    deleted through the ORM takes its steps with it, and so does its project: no step is left without one."""
    from tests.annotations.releases_factories import make_trace
    from traces.models import Step, Trace

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = 'traces_step'::regclass AND contype = 'f'")
        assert cursor.fetchone() == (0,)
    trace = make_trace(project, raw_text="a\nb")
    Step.objects.bulk_create(Step(trace=trace, index=i, content=c, line_start=i + 1, line_end=i + 1)
                             for i, c in enumerate("ab"))  # fmt: skip
    other = make_trace(project, raw_text="c")
    Step.objects.create(trace=other, index=0, content="c", line_start=1, line_end=1)
    Trace.objects.filter(pk=trace.pk).delete()
    assert not Step.objects.filter(trace_id=trace.pk).exists() and Step.objects.filter(trace=other).count() == 1
    project.delete()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM traces_step s WHERE NOT EXISTS (SELECT 1 FROM traces_trace t WHERE t.id = s.trace_id)"
        )
        assert cursor.fetchone() == (0,)
