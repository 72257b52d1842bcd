"""Trigram indexes of the trace list without GIN's pending list (PostgreSQL only).

With ``fastupdate`` on (the default), rows inserted by an import wait in an unsorted pending list
until a vacuum, and every search scans that list: a search over 10,000 freshly imported traces
took ~500 ms instead of ~1 ms. Off, each insert updates the index directly (a little slower to
import, always fast to search). The pending list left by earlier inserts is merged now.
"""

from django.db import migrations

INDEXES = ["trace_task_trgm", "trace_title_trgm", "trace_external_id_trgm"]


def _fastupdate(value: str):
    def run(apps, schema_editor):
        for name in INDEXES:
            schema_editor.execute(f"ALTER INDEX IF EXISTS {name} SET (fastupdate = {value})")
            if value == "off":
                schema_editor.execute(
                    f"SELECT gin_clean_pending_list('{name}'::regclass) WHERE to_regclass('{name}') IS NOT NULL"
                )

    return run


class Migration(migrations.Migration):
    dependencies = [("traces", "0003_import_lz4_compression")]

    operations = [migrations.RunPython(_fastupdate("off"), _fastupdate("on"))]
