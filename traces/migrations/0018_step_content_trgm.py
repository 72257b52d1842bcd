"""The corpus search's index: trigrams of every step's content (``annotations/corpus/query.py``).

Built ``CONCURRENTLY`` (the migration is not atomic), so an existing project keeps importing
while it is built: PostgreSQL waits for running imports to finish their transaction, then builds
the index beside new writes. An interrupted build leaves an INVALID index, which this migration
drops and builds again when run again. Kept out of the model's Meta (an opclass index on a
TextField, PostgreSQL-only), like the trace list's trigram indexes (0002).

``fastupdate`` stays on (GIN's default): an import appends its steps' trigrams to the index's
pending list and PostgreSQL merges the list in bulk, which keeps imports near their speed without
the index (``bench/bench_corpus.py``); searches read the pending list as well, so nothing is missed.
"""

from django.db import migrations

NAME = "step_content_trgm"


def forwards(apps, schema_editor):
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            [NAME],
        )
        row = cur.fetchone()
    if row and row[0]:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
    schema_editor.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON traces_step USING gin (content gin_trgm_ops)"
    )


def backwards(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("traces", "0017_ingest_stats")]

    operations = [migrations.RunPython(forwards, backwards, atomic=False)]
