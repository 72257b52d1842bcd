"""The corpus search's word index: the distinct words of every searchable step (``annotations/corpus/``).

A trigram index finds a word's candidates by its trigrams, and a word made of common trigrams has
many times more candidates than hits ("insensi": 1,049,838 candidates for 67,448 steps at 20 M
steps; a number like "777777": 116,905 for 25), each read and rechecked. This index holds each
step's words themselves, so a word or phrase search reads the steps holding all its words and
rechecks only those.

``step_words(text)``: the distinct lower-cased runs of letters, digits and underscores (what
PostgreSQL's regular expressions call word characters, so a ``\\mword\\M`` match is always one of
them), 1-100 characters (longer runs stay out: a GIN key has a size limit). Partial like the
trigram index (``WHERE searchable IS TRUE``: the workers' indexer makes new steps searchable), built
``CONCURRENTLY``; an interrupted build is dropped and built again when the migration runs again.
"""

from importlib import import_module

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION step_words(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT w), '{}')
  FROM regexp_split_to_table(lower(t), '[^[:alnum:]_]+') AS w
  WHERE length(w) BETWEEN 1 AND 100
$$
"""
NAME = "step_words_gin"
# "IS TRUE", not the trigram index's plain "searchable": a search that does not ask for words
# (a prefix, a regex) cannot then read this index whole as a list of the searchable steps
DEFINITION = "ON traces_step USING gin (step_words(content)) WHERE searchable IS TRUE"


def forwards(apps, schema_editor):
    schema_editor.execute(FUNCTION)
    # 0018's (a migration's module name starts with a digit: imported by name)
    import_module("traces.migrations.0018_step_content_trgm").build_concurrently(schema_editor, NAME, DEFINITION)


def backwards(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
    schema_editor.execute("DROP FUNCTION IF EXISTS step_words(text)")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("traces", "0018_step_content_trgm")]

    operations = [migrations.RunPython(forwards, backwards, atomic=False)]
