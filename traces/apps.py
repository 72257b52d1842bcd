from django.apps import AppConfig


class TracesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "traces"

    def ready(self) -> None:
        # Celery's autodiscovery looks for <app>.tasks only; each area keeps its own tasks module.
        from taxonomy.access import version_user_register
        from traces.importing import tasks  # noqa: F401
        from traces.projects.selectors import version_used_by_managed_project

        version_user_register(name="traces.project", fn=version_used_by_managed_project)
