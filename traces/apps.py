from django.apps import AppConfig


class TracesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "traces"

    def ready(self) -> None:
        # Celery's autodiscovery looks for <app>.tasks only; each area keeps its own tasks module.
        from traces.importing import tasks  # noqa: F401
