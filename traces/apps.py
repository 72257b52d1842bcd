from django.apps import AppConfig


class TracesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "traces"

    def ready(self) -> None:
        # Celery's autodiscovery looks for <app>.tasks only; each area keeps its own tasks module.
        from traces.importing import tasks  # noqa: F401
        from traces.projects.tabs import project_tab_register

        # The bar's order; the annotations app puts its tabs (rounds ... releases) at 40-70.
        project_tab_register(key="overview", label="Overview", url_name="project_detail", capability="view", order=10)
        project_tab_register(key="traces", label="Traces", url_name="trace_list", capability="view", order=20)
        project_tab_register(key="import", label="Import", url_name="import_page", capability="manage", order=30)
        project_tab_register(key="members", label="Members", url_name="project_members", capability="view", order=80)
