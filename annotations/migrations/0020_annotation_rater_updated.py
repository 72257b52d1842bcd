"""A rater's annotations by state with their last change, so that ``labels_fingerprint`` counts
them and reads the latest off the index alone; it replaces (rater, state), its prefix. Built
``CONCURRENTLY``: a project keeps labelling while it is built."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("annotations", "0019_corpus")]

    operations = [
        AddIndexConcurrently(
            model_name="annotation",
            index=models.Index(fields=["rater", "state", "updated_at"], name="annotation_rater_updated"),
        ),
        RemoveIndexConcurrently(model_name="annotation", name="annotation_rater_state"),
    ]
