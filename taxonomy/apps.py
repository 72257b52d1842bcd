"""The taxonomy app's config."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _seed_mast(sender, **kwargs) -> None:
    # Runs after every migrate (and after test-database flushes): idempotent.
    from taxonomy.services import taxonomy_seed_mast

    taxonomy_seed_mast()


class TaxonomyConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "taxonomy"

    def ready(self) -> None:
        post_migrate.connect(_seed_mast, sender=self, dispatch_uid="taxonomy_seed_mast")
