"""The traces app's config: registers its job kind and what it offers the apps above it."""

from django.apps import AppConfig


class TracesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "traces"

    def ready(self) -> None:
        # Imported in ready(): the models are loaded only now, and these modules import them.
        from taxonomy.access import version_adopters_register, version_user_register
        from traces import jobs
        from traces.importing.jobs import IMPORT_JOBS
        from traces.projects.selectors import projects_that_could_adopt, version_used_by_managed_project
        from traces.projects.tabs import project_tab_register

        # Who may change a taxonomy draft: the managers of projects using it (taxonomy.access).
        version_user_register(name="traces.project", fn=version_used_by_managed_project)
        version_adopters_register(name="traces.project", fn=projects_that_could_adopt)
        jobs.job_kind_register(IMPORT_JOBS)  # the sweep recovers imports whose worker died (traces/jobs.py)
        # The bar's order; the annotations app puts its tabs (rounds ... releases) at 40-70.
        project_tab_register(key="overview", label="Overview", url_name="project_detail", capability="view", order=10)
        project_tab_register(key="traces", label="Traces", url_name="trace_list", capability="view", order=20)
        project_tab_register(key="import", label="Import", url_name="import_page", capability="manage", order=30)
        project_tab_register(key="members", label="Members", url_name="project_members", capability="view", order=80)
        project_tab_register(
            key="settings", label="Settings", url_name="project_settings", capability="manage", order=90
        )
