"""Round.kind: what a round measures (failure modes, or failure attribution with the mode labels as
context), so the agreement trend puts each round in the series it measured.

Adding a NOT NULL column and a check constraint makes SQLite (the demo's database) rebuild
``annotations_round``, which the agreed-labels stamp triggers of 0010 name: they are dropped
before and created again after (on PostgreSQL the same drop and create is a no-op in effect)."""

import importlib

from django.db import migrations, models

_stamp = importlib.import_module("annotations.migrations.0010_scale_labels_stamp")


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0012_agreed_mask"),
    ]

    operations = [
        migrations.RunPython(_stamp.backwards, _stamp.forwards),
        migrations.AddField(
            model_name="round",
            name="kind",
            field=models.CharField(
                choices=[("modes", "Failure modes"), ("attribution", "Failure attribution")],
                default="modes",
                help_text="What the round measures. Failure modes: the mode labels' agreement (and the "
                "attribution's, where annotators attribute). Failure attribution: who and when; the mode "
                "labels are context and stay out of the failure-mode agreement trend.",
                max_length=12,
            ),
        ),
        migrations.AddConstraint(
            model_name="round",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ["modes", "attribution"])), name="round_kind_valid"
            ),
        ),
        migrations.RunPython(_stamp.forwards, _stamp.backwards),
    ]
