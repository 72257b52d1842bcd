"""Compress trace text with lz4 instead of pglz (PostgreSQL 14+).

Storing a 200 MB MAST-Data file writes every byte twice (the raw text and the steps); pglz
compression of those TOASTed values is a large share of the server's COPY time, lz4 is several
times faster at a similar ratio. Only new values are affected.
"""

from django.db import migrations

COLUMNS = [("traces_trace", "raw_text"), ("traces_step", "content")]


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
    dependencies = [("traces", "0002_viewer_indexes")]

    operations = [migrations.RunPython(_set("lz4"), _set("pglz"))]
