"""Database-level guarantee: rows of a published taxonomy version cannot change.

Categories, failure modes and mappings of a published version refuse INSERT, UPDATE and
DELETE, and a published version row itself refuses UPDATE and DELETE.
"""

from django.db import migrations

CHILD_TABLES = ["taxonomy_category", "taxonomy_failuremode", "taxonomy_modemapping"]

PG_FUNCTIONS = """
CREATE OR REPLACE FUNCTION taxonomy_refuse_published_child() RETURNS trigger AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
      SELECT 1 FROM taxonomy_taxonomyversion WHERE id = OLD.version_id AND status = 'published') THEN
    RAISE EXCEPTION 'taxonomy version % is published and immutable', OLD.version_id;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND EXISTS (
      SELECT 1 FROM taxonomy_taxonomyversion WHERE id = NEW.version_id AND status = 'published') THEN
    RAISE EXCEPTION 'taxonomy version % is published and immutable', NEW.version_id;
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION taxonomy_refuse_published_version() RETURNS trigger AS $$
BEGIN
  IF OLD.status = 'published' THEN
    RAISE EXCEPTION 'taxonomy version % is published and immutable', OLD.id;
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""


def forwards(apps, schema_editor):
    def run(sql):
        schema_editor.execute(sql, params=None)

    run(PG_FUNCTIONS)
    for table in CHILD_TABLES:
        run(
            f"CREATE TRIGGER {table}_immutable BEFORE INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION taxonomy_refuse_published_child()"
        )
    run(
        "CREATE TRIGGER taxonomy_version_immutable BEFORE UPDATE OR DELETE ON "
        "taxonomy_taxonomyversion FOR EACH ROW EXECUTE FUNCTION taxonomy_refuse_published_version()"
    )


def backwards(apps, schema_editor):
    def run(sql):
        schema_editor.execute(sql, params=None)

    for table in CHILD_TABLES:
        run(f"DROP TRIGGER IF EXISTS {table}_immutable ON {table}")
    run("DROP TRIGGER IF EXISTS taxonomy_version_immutable ON taxonomy_taxonomyversion")
    run("DROP FUNCTION IF EXISTS taxonomy_refuse_published_child()")
    run("DROP FUNCTION IF EXISTS taxonomy_refuse_published_version()")


class Migration(migrations.Migration):
    dependencies = [("taxonomy", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
