"""ImportJob.upload_dir becomes a folder name in the storage (``imports/<id>``, traces/storage.py)
instead of an absolute path under MEDIA_ROOT: a kept upload of a failed job stays retryable, and
the same row means the same files on every machine."""

from django.db import migrations


def _relative(apps, schema_editor):
    ImportJob = apps.get_model("traces", "ImportJob")
    for pk, folder in ImportJob.objects.exclude(upload_dir="").values_list("pk", "upload_dir"):
        if folder.startswith("/"):
            ImportJob.objects.filter(pk=pk).update(upload_dir=f"imports/{pk}")


def _absolute(apps, schema_editor):
    from django.conf import settings

    ImportJob = apps.get_model("traces", "ImportJob")
    for pk, folder in ImportJob.objects.exclude(upload_dir="").values_list("pk", "upload_dir"):
        if not folder.startswith("/"):
            ImportJob.objects.filter(pk=pk).update(upload_dir=f"{settings.MEDIA_ROOT}/{folder}")


class Migration(migrations.Migration):
    dependencies = [("traces", "0014_step_recipient")]
    operations = [migrations.RunPython(_relative, _absolute)]
