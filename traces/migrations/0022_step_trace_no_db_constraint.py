"""No foreign key constraint from a step to its trace in the database: its check ran once per
imported step (a query and a row lock on the trace), ~37% of PostgreSQL's CPU in a MAST-Data
import. Why that is safe is beside ``Step.trace`` (traces/models.py). Dropping it is a catalog
change; adding it back (backwards) checks every step."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("traces", "0021_step_content_change")]

    operations = [
        migrations.AlterField(
            model_name="step",
            name="trace",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="steps",
                to="traces.trace",
            ),
        ),
    ]
