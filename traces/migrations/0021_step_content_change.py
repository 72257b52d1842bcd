"""A step whose text changes is searchable again only once the indexer has taken it.

The corpus search's vocabulary (0020) is written by the indexer as it makes steps searchable;
the importer never rewrites a step's text, but an edit in admin or a script's UPDATE would leave a
searchable step whose new words the vocabulary lacks, so a regex search would miss it silently.
This trigger turns such a step back to not searchable: it waits for the indexer like a new one
(counted as "not searchable yet" meanwhile), which adds its words. Fires only when ``content`` is
set and differs (the indexer's own UPDATE sets ``searchable`` only).
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION traces_step_content_changed() RETURNS trigger AS $$
BEGIN
  NEW.searchable := false;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
"""
TRIGGER = """
CREATE TRIGGER traces_step_content_changed BEFORE UPDATE OF content ON traces_step
FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content) EXECUTE FUNCTION traces_step_content_changed()
"""


class Migration(migrations.Migration):
    dependencies = [("traces", "0020_search_words")]

    operations = [
        migrations.RunSQL(
            sql=[FUNCTION, TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS traces_step_content_changed ON traces_step",
                "DROP FUNCTION IF EXISTS traces_step_content_changed()",
            ],
        )
    ]
