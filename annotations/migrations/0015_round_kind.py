"""Round.kind: what a round measures (failure modes, or failure attribution with the mode labels as
context), so the agreement trend puts each round in the series it measured."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0014_judge_run_use_cache"),
    ]

    operations = [
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
    ]
