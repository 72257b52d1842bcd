"""The traces stamp: a per-project number bumped by triggers on every UPDATE of ``traces_trace``.

The dashboard caches the traces' columns (framework, LLM, benchmark, outcome, sizes) and the
filter choices under the traces' count and highest id, which move with every import and
deletion; an edit in place (admin, shell, SQL) moves neither, so without this number a corrected
framework name would show its old value until the cache entry expired. One statement-level
trigger (a transition table, so an UPDATE of many rows bumps once per project).
"""

import django.db.models.deletion
from django.db import migrations, models

STAMP = "traces_tracesstamp"

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION traces_traces_stamp_bump() RETURNS trigger AS $$
BEGIN
  INSERT INTO {STAMP} (project_id, version)
    SELECT project_id, 1 FROM (SELECT project_id FROM stamp_new UNION SELECT project_id FROM stamp_old) p
    ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
"""


def forwards(apps, schema_editor):
    schema_editor.execute(PG_FUNCTION, params=None)
    schema_editor.execute(
        "CREATE TRIGGER traces_trace_stamp_update AFTER UPDATE ON traces_trace "
        "REFERENCING OLD TABLE AS stamp_old NEW TABLE AS stamp_new "
        "FOR EACH STATEMENT EXECUTE FUNCTION traces_traces_stamp_bump()",
        params=None,
    )


def backwards(apps, schema_editor):
    schema_editor.execute("DROP TRIGGER IF EXISTS traces_trace_stamp_update ON traces_trace", params=None)
    schema_editor.execute("DROP FUNCTION IF EXISTS traces_traces_stamp_bump()", params=None)


class Migration(migrations.Migration):
    dependencies = [("traces", "0011_dashboard_columns_index")]

    operations = [
        migrations.CreateModel(
            name="TracesStamp",
            fields=[
                (
                    "project",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="traces.project",
                    ),
                ),
                ("version", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
