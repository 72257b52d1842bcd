"""Agreed masks: one row per (round, trace) holding its consensus as bit masks (``AgreedMask``),
kept true by PostgreSQL triggers so that a cold dashboard reads 10,000 small rows instead of
aggregating 140,000 adjudications (issues 13 and 18).

The rules, all in the database so that no write path can forget them:

* any INSERT, UPDATE or DELETE of ``annotations_adjudication`` (services, admin, imports, COPY,
  cascades) recomputes, from the adjudication rows, every (round, trace) pair the statement
  touched (old and new side of an update): one statement-level trigger per operation, so a COPY
  of a million rows recomputes once; a TRUNCATE empties the masks;
* an UPDATE of a round's ``taxonomy_version_id`` recomputes that round (bits follow the version);
* any write to ``taxonomy_failuremode`` recomputes the rounds on the versions it touched (the bit
  layout is the version's modes in id order, which only an added, removed or moved mode changes);
* a recompute first locks the project's ``LabelsStamp`` row (which every adjudication and round
  write locks anyway), then reads the rows in fresh statements, so two transactions writing the
  same (round, trace) cannot leave a mask computed from a snapshot without the other's rows.
"""

import django.db.models.deletion
from django.db import migrations, models

MASK = "annotations_agreedmask"
STAMP = "annotations_labelsstamp"

# Serialise per project on the project's LabelsStamp row, the row every adjudication and round write
# already locks (its triggers upsert it): one lock order for both triggers, so no new deadlock.
# After the lock, the next statements take fresh snapshots that see what the holder committed.
LOCK = f"""INSERT INTO {STAMP} (project_id, version)
    SELECT DISTINCT project_id, 0 FROM annotations_round WHERE id = ANY(round_ids)
    ON CONFLICT (project_id) DO NOTHING;
  PERFORM 1 FROM {STAMP} WHERE project_id IN (SELECT project_id FROM annotations_round WHERE id = ANY(round_ids))
    ORDER BY project_id FOR UPDATE;"""  # noqa: S608 - our own table names, no input

# mode id -> its bit (1 << position among its version's modes in id order), for the given versions
BITS = """(SELECT id, version_id,
                  (1::bigint << ((row_number() OVER (PARTITION BY version_id ORDER BY id)) - 1)::int) AS bit
           FROM taxonomy_failuremode WHERE version_id IN (SELECT taxonomy_version_id FROM annotations_round
                                                           WHERE id = ANY(round_ids)))"""

SUMS = """SUM(CASE WHEN a.decision = 'present' THEN b.bit ELSE 0 END), SUM(b.bit),
          SUM(CASE WHEN a.basis = 'unanimous' THEN b.bit ELSE 0 END),
          SUM(CASE WHEN a.basis = 'majority' THEN b.bit ELSE 0 END)"""

PG_FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION annotations_agreed_mask_pairs(round_ids bigint[], trace_ids bigint[]) RETURNS void AS $$
BEGIN
  {LOCK}
  DELETE FROM {MASK} m USING unnest(round_ids, trace_ids) AS p(round_id, trace_id)
    WHERE m.round_id = p.round_id AND m.trace_id = p.trace_id;
  INSERT INTO {MASK} (round_id, trace_id, present, known, unanimous, majority)
    SELECT a.round_id, a.trace_id, {SUMS}
    FROM annotations_adjudication a
    JOIN annotations_round r ON r.id = a.round_id
    JOIN {BITS} b ON b.id = a.mode_id AND b.version_id = r.taxonomy_version_id
    WHERE (a.round_id, a.trace_id) IN (SELECT * FROM unnest(round_ids, trace_ids))
    GROUP BY a.round_id, a.trace_id;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION annotations_agreed_mask_rounds(round_ids bigint[]) RETURNS void AS $$
BEGIN
  {LOCK}
  DELETE FROM {MASK} WHERE round_id = ANY(round_ids);
  INSERT INTO {MASK} (round_id, trace_id, present, known, unanimous, majority)
    SELECT a.round_id, a.trace_id, {SUMS}
    FROM annotations_adjudication a
    JOIN annotations_round r ON r.id = a.round_id
    JOIN {BITS} b ON b.id = a.mode_id AND b.version_id = r.taxonomy_version_id
    WHERE a.round_id = ANY(round_ids)
    GROUP BY a.round_id, a.trace_id;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION annotations_agreed_mask_adjudication() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM annotations_agreed_mask_pairs(array_agg(round_id), array_agg(trace_id))
      FROM (SELECT DISTINCT round_id, trace_id FROM mask_new) p HAVING COUNT(*) > 0;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM annotations_agreed_mask_pairs(array_agg(round_id), array_agg(trace_id))
      FROM (SELECT DISTINCT round_id, trace_id FROM mask_old) p HAVING COUNT(*) > 0;
  ELSE
    PERFORM annotations_agreed_mask_pairs(array_agg(round_id), array_agg(trace_id))
      FROM (SELECT round_id, trace_id FROM mask_new UNION SELECT round_id, trace_id FROM mask_old) p
      HAVING COUNT(*) > 0;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION annotations_agreed_mask_round() RETURNS trigger AS $$
BEGIN
  PERFORM annotations_agreed_mask_rounds(array_agg(n.id))
    FROM mask_new n JOIN mask_old o ON o.id = n.id
    WHERE n.taxonomy_version_id IS DISTINCT FROM o.taxonomy_version_id HAVING COUNT(*) > 0;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION annotations_agreed_mask_mode() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM annotations_agreed_mask_rounds(array_agg(r.id)) FROM annotations_round r
      WHERE r.taxonomy_version_id IN (SELECT version_id FROM mask_new) HAVING COUNT(*) > 0;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM annotations_agreed_mask_rounds(array_agg(r.id)) FROM annotations_round r
      WHERE r.taxonomy_version_id IN (SELECT version_id FROM mask_old) HAVING COUNT(*) > 0;
  ELSE
    PERFORM annotations_agreed_mask_rounds(array_agg(r.id)) FROM annotations_round r
      WHERE r.taxonomy_version_id IN (
        SELECT n.version_id FROM mask_new n JOIN mask_old o ON o.id = n.id
          WHERE n.version_id IS DISTINCT FROM o.version_id
        UNION SELECT o.version_id FROM mask_new n JOIN mask_old o ON o.id = n.id
          WHERE n.version_id IS DISTINCT FROM o.version_id
        UNION SELECT n.version_id FROM mask_new n WHERE n.id NOT IN (SELECT id FROM mask_old)
        UNION SELECT o.version_id FROM mask_old o WHERE o.id NOT IN (SELECT id FROM mask_new))
      HAVING COUNT(*) > 0;
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION annotations_agreed_mask_truncate() RETURNS trigger AS $$
BEGIN
  DELETE FROM {MASK};
  RETURN NULL;
END $$ LANGUAGE plpgsql;
"""  # noqa: S608 - our own table names, no input

REFERENCING = {
    "INSERT": "REFERENCING NEW TABLE AS mask_new",
    "DELETE": "REFERENCING OLD TABLE AS mask_old",
    "UPDATE": "REFERENCING OLD TABLE AS mask_old NEW TABLE AS mask_new",
}
TRIGGERS = (
    [
        (
            f"annotations_adjudication_mask_{op.lower()}",
            "annotations_adjudication",
            op,
            ref,
            "annotations_agreed_mask_adjudication",
        )
        for op, ref in REFERENCING.items()
    ]
    + [
        (f"taxonomy_failuremode_mask_{op.lower()}", "taxonomy_failuremode", op, ref, "annotations_agreed_mask_mode")
        for op, ref in REFERENCING.items()
    ]
    + [
        (
            "annotations_round_mask_update",
            "annotations_round",
            "UPDATE",
            REFERENCING["UPDATE"],
            "annotations_agreed_mask_round",
        ),
        (
            "annotations_adjudication_mask_truncate",
            "annotations_adjudication",
            "TRUNCATE",
            "",
            "annotations_agreed_mask_truncate",
        ),
    ]
)
FUNCTIONS = ["pairs(bigint[], bigint[])", "rounds(bigint[])", "adjudication()", "round()", "mode()", "truncate()"]


def forwards(apps, schema_editor):
    schema_editor.execute(PG_FUNCTIONS, params=None)
    for name, table, op, referencing, function in TRIGGERS:
        schema_editor.execute(
            f"CREATE TRIGGER {name} AFTER {op} ON {table} {referencing} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
            params=None,
        )
    # the rows of the adjudications already there
    schema_editor.execute(
        "SELECT annotations_agreed_mask_rounds(array_agg(id)) FROM annotations_round HAVING COUNT(*) > 0", params=None
    )


def backwards(apps, schema_editor):
    for name, table, *_ in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}", params=None)
    for f in FUNCTIONS:
        schema_editor.execute(f"DROP FUNCTION IF EXISTS annotations_agreed_mask_{f}", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0011_open_code_promotion"),
        ("taxonomy", "0003_loop_cross_mappings"),
        ("traces", "0008_imp_spans_step_tree"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgreedMask",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("present", models.BigIntegerField()),
                ("known", models.BigIntegerField()),
                ("unanimous", models.BigIntegerField()),
                ("majority", models.BigIntegerField()),
                (
                    "round",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="annotations.round"
                    ),
                ),
                (
                    "trace",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="traces.trace"),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("round", "trace"), name="agreed_mask_unique")],
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
