"""The corpus search's vocabulary (``SearchWord``) and the steps with words too long for it.

A regular expression whose literal is made of common trigrams (``inta\\w+``) had the trigram
index hand over millions of candidate steps for a few thousand matches (1.9 s at 20 M steps).
When every match of a pattern is made of word characters, a step matches only if one of its words
(``step_words``, 0019) does: the search then looks the pattern up among the distinct words
(``traces_searchword``, with a trigram index of its own: a few million short strings), and the steps
holding one of those words in the word index. Words longer than 100 characters are not keys of the
word index, so the few steps holding one are listed by ``step_long_words`` (a partial index) and
always rechecked.

* ``traces_searchword``: every word of a searchable step, filled here from the steps searchable
  now (only when empty: a migration interrupted during the fill rolled it back whole), then kept by
  the indexer as it makes new steps searchable (``traces/search/indexing.py``).
* ``step_long_words``: built ``CONCURRENTLY`` like 0018's and 0019's indexes.
"""

from importlib import import_module

from django.db import migrations, models

LONG = "[[:alnum:]_]{101}"  # a run of word characters longer than step_words keeps (0019)
INDEXES = {
    "searchword_trgm": "ON traces_searchword USING gin (word gin_trgm_ops)",
    "step_long_words": f"ON traces_step (id) WHERE searchable IS TRUE AND content ~ '{LONG}'",
}
FILL = """
INSERT INTO traces_searchword (word)
SELECT DISTINCT w FROM traces_step, unnest(step_words(content)) AS w WHERE searchable IS TRUE
ON CONFLICT DO NOTHING
"""


def forwards(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT NOT EXISTS (SELECT 1 FROM traces_searchword)")
        if cur.fetchone()[0]:
            cur.execute(FILL)
    build = import_module("traces.migrations.0018_step_content_trgm").build_concurrently
    for name, definition in INDEXES.items():
        build(schema_editor, name, definition)


def backwards(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("traces", "0019_step_words")]

    operations = [
        migrations.CreateModel(
            name="SearchWord",
            fields=[("word", models.TextField(primary_key=True, serialize=False))],
        ),
        migrations.RunPython(forwards, backwards, atomic=False),
    ]
