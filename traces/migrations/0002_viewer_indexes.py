"""Indexes for the trace list (PostgreSQL only; other databases skip them).

* Trigram GIN indexes on UPPER(...) of external_id, title and task: Django's ``icontains`` on
  PostgreSQL is ``UPPER(col::text) LIKE UPPER(%s)``, so these make the list's free-text search
  an index lookup instead of reading every task.
* (project, column, id) b-trees for the list's sort orders, so a sorted page is an index walk.

Kept out of the model's Meta on purpose (expression + opclass indexes, PostgreSQL-only); the
model state is unchanged.
"""

from django.db import migrations

INDEXES = [
    ("trace_task_trgm", "USING gin (UPPER(task) gin_trgm_ops)"),
    ("trace_title_trgm", "USING gin (UPPER(title::text) gin_trgm_ops)"),
    ("trace_external_id_trgm", "USING gin (UPPER(external_id::text) gin_trgm_ops)"),
    ("trace_project_size", "(project_id, size_bytes DESC, id DESC)"),
    ("trace_project_steps", "(project_id, n_steps DESC, id DESC)"),
    ("trace_project_agents", "(project_id, n_agents DESC, id DESC)"),
    ("trace_project_framework", "(project_id, mas_name, id DESC)"),
]


def forwards(apps, schema_editor):
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, definition in INDEXES:
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON traces_trace {definition}")


def backwards(apps, schema_editor):
    for name, _ in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("traces", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
