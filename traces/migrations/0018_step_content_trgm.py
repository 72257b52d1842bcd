"""The corpus search's index: trigrams of every searchable step's text (``annotations/corpus/``).

* ``Step.searchable``: steps already stored are searchable (the column is added with DEFAULT
  true, which PostgreSQL records without rewriting the table), new ones are written false and
  made searchable after their import (``traces/search/indexing.py``), which keeps trigram
  indexing off the import's path.
* ``step_content_trgm``: a trigram GIN index on the text of searchable steps, and
  ``step_waiting_search``: the few steps waiting for it, for the indexer and the search's
  "not searchable yet" count.

Both indexes are built ``CONCURRENTLY`` (the migration is not atomic), so a project keeps
importing while they are built: PostgreSQL waits for running imports to finish their
transaction, then builds beside new writes. An interrupted build leaves an INVALID index, which
this migration drops and builds again when run again. Kept out of the model's Meta (an opclass
index with a condition, PostgreSQL-only), like the trace list's trigram indexes (0002).
"""

from django.db import migrations, models

INDEXES = {
    "step_content_trgm": "ON traces_step USING gin (content gin_trgm_ops) WHERE searchable",
    "step_waiting_search": "ON traces_step (trace_id) WHERE NOT searchable",
}


def build_concurrently(schema_editor, name: str, definition: str) -> None:
    """CREATE INDEX CONCURRENTLY, dropping first an INVALID one an interrupted build left (also 0019's)."""
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            [name],
        )
        row = cur.fetchone()
    if row and row[0]:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")


def forwards(apps, schema_editor):
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, definition in INDEXES.items():
        build_concurrently(schema_editor, name, definition)


def backwards(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("traces", "0017_ingest_stats")]

    operations = [
        migrations.RunSQL(
            sql=[
                "ALTER TABLE traces_step ADD COLUMN searchable boolean NOT NULL DEFAULT true",
                "ALTER TABLE traces_step ALTER COLUMN searchable SET DEFAULT false",
            ],
            reverse_sql=["ALTER TABLE traces_step DROP COLUMN searchable"],
            state_operations=[
                migrations.AddField(
                    model_name="step", name="searchable", field=models.BooleanField(default=False, db_default=False)
                )
            ],
        ),
        migrations.RunPython(forwards, backwards, atomic=False),
    ]
