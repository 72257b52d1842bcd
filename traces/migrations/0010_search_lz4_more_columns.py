"""lz4 for the other large values of traces (PostgreSQL 14+; 0003 did the raw text and the steps).

A trace's task (a benchmark's problem statement runs to kilobytes) and metadata, a step's
details and an import's report are TOASTed when large, with pglz by default; lz4 compresses and
decompresses several times faster at a similar ratio. Only values written from now on change;
Servers built without lz4 are left alone, as in 0003.
"""

from django.db import migrations

COLUMNS = [
    ("traces_trace", "task"),
    ("traces_trace", "metadata"),
    ("traces_step", "details"),
    ("traces_importjob", "report"),
]


def _set(method):
    def run(apps, schema_editor):
        conn = schema_editor.connection
        if conn.pg_version < 140000:
            return
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_settings WHERE name = %s AND %s = ANY(enumvals)", ["default_toast_compression", "lz4"]
            )
            if cursor.fetchone() is None:
                return  # a server built without lz4
            for table, column in COLUMNS:
                cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')

    return run


class Migration(migrations.Migration):
    dependencies = [("traces", "0009_search_step_trace_single_index")]

    operations = [migrations.RunPython(_set("lz4"), _set("pglz"))]
