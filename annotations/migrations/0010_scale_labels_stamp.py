"""The agreed-labels stamp: a per-project number bumped by triggers on every write to the tables
behind the agreed labels (``annotations_adjudication``, ``annotations_round``).

Triggers rather than service calls because adjudications are also written by imports, admin,
COPY (benchmarks) and cascades, and a cache keyed on a stamp that one path forgets to bump would
serve stale figures. One statement-level trigger per operation (transition tables, so a COPY of a
million adjudications bumps once). The saves path
(annotations, mode labels) has no trigger: its fingerprints stay aggregates.
"""

import django.db.models.deletion
from django.db import migrations, models

TABLES = {"annotations_adjudication": "round", "annotations_round": "project"}
STAMP = "annotations_labelsstamp"

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION annotations_labels_stamp_bump() RETURNS trigger AS $$
BEGIN
  -- TG_ARGV[0]: 'round' when the rows carry round_id, 'project' when they carry project_id
  IF TG_ARGV[0] = 'round' THEN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO {STAMP} (project_id, version)
        SELECT DISTINCT r.project_id, 1 FROM stamp_new n JOIN annotations_round r ON r.id = n.round_id
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    ELSIF TG_OP = 'DELETE' THEN
      INSERT INTO {STAMP} (project_id, version)
        SELECT DISTINCT r.project_id, 1 FROM stamp_old o JOIN annotations_round r ON r.id = o.round_id
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    ELSE
      INSERT INTO {STAMP} (project_id, version)
        SELECT r.project_id, 1 FROM annotations_round r
        WHERE r.id IN (SELECT round_id FROM stamp_new UNION SELECT round_id FROM stamp_old)
        GROUP BY r.project_id
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    END IF;
  ELSE
    IF TG_OP = 'INSERT' THEN
      INSERT INTO {STAMP} (project_id, version) SELECT DISTINCT project_id, 1 FROM stamp_new
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    ELSIF TG_OP = 'DELETE' THEN
      INSERT INTO {STAMP} (project_id, version) SELECT DISTINCT project_id, 1 FROM stamp_old
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    ELSE
      INSERT INTO {STAMP} (project_id, version)
        SELECT project_id, 1 FROM (SELECT project_id FROM stamp_new UNION SELECT project_id FROM stamp_old) p
        ON CONFLICT (project_id) DO UPDATE SET version = {STAMP}.version + 1;
    END IF;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
"""

PG_REFERENCING = {
    "INSERT": "REFERENCING NEW TABLE AS stamp_new",
    "DELETE": "REFERENCING OLD TABLE AS stamp_old",
    "UPDATE": "REFERENCING OLD TABLE AS stamp_old NEW TABLE AS stamp_new",
}


def forwards(apps, schema_editor):
    def run(sql):
        schema_editor.execute(sql, params=None)

    run(PG_FUNCTION)
    for table, kind in TABLES.items():
        for op, referencing in PG_REFERENCING.items():
            run(
                f"CREATE TRIGGER {table}_stamp_{op.lower()} AFTER {op} ON {table} {referencing} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION annotations_labels_stamp_bump('{kind}')"
            )


def backwards(apps, schema_editor):
    for table in TABLES:
        for op in ("insert", "update", "delete"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_stamp_{op} ON {table}", params=None)
    schema_editor.execute("DROP FUNCTION IF EXISTS annotations_labels_stamp_bump()", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0009_judge_connections_reasoning"),
        ("traces", "0008_imp_spans_step_tree"),
    ]

    operations = [
        migrations.CreateModel(
            name="LabelsStamp",
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
