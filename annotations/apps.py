"""The annotations app's config: registers its hooks, tabs, job kind and checks in the registries below."""

from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotations"

    def ready(self) -> None:
        """Everything annotations adds to the apps below it goes through their registries, so
        taxonomy and traces never import annotations."""
        # Imported in ready(): the models are loaded only now, and these modules import them.
        from annotations.judge import checks  # noqa: F401  (registers the settings checks)
        from annotations.judge.live import live_judge_backlog, live_policy_apply
        from annotations.labels.imported import MastDataJudgeHook
        from annotations.labels.imported_attribution import GroundTruthAttributionHook
        from annotations.labels.trace_state import labelling_annotations
        from annotations.releases.imported import ReleaseLabelsHook
        from annotations.releases.jobs import RELEASE_JOBS
        from annotations.rounds.imported import MastHumanRoundsHook
        from annotations.rounds.taxonomy_users import version_used_by_managed_round
        from annotations.status import project_status
        from taxonomy.access import version_user_register
        from traces.importing.hooks import register_import_hook
        from traces.jobs import job_kind_register
        from traces.live.hooks import live_summary_register, live_trace_register
        from traces.projects.overview import project_status_register
        from traces.projects.tabs import project_tab_register
        from traces.viewer.label_state import trace_label_state_register

        # Labels that come with imported records (MAST-Data's mast_annotation) are stored by hooks.
        register_import_hook(MastDataJudgeHook())
        job_kind_register(RELEASE_JOBS)  # the sweep recovers release builds whose worker died (traces/jobs.py)
        register_import_hook(MastHumanRoundsHook())  # human-labelled records -> closed calibration rounds
        register_import_hook(GroundTruthAttributionHook())  # Who&When / TRAIL ground truth -> a source rater
        register_import_hook(ReleaseLabelsHook())  # a release imported again: agreed labels and raters back
        trace_label_state_register(labelling_annotations)  # the trace list's "labelled"
        live_trace_register(live_policy_apply)  # each new live trace: the live judge policy's draws
        live_summary_register(live_judge_backlog)  # the live page's judge backlog
        # the project home page's "where the work stands" panel (annotations/status.py)
        project_status_register(key="loop", fn=project_status, template="annotations/_status.html", order=10)
        version_user_register(name="annotations.round", fn=version_used_by_managed_round)
        # The project tab bar: between traces' Import (30) and Members (80).
        for key, label, url_name, capability, order in (
            ("search", "Search", "annotations:corpus_search", "view", 25),
            ("rounds", "Rounds", "annotations:round_list", "view", 40),
            ("judge", "LLM judge", "annotations:judge_list", "manage", 50),
            ("codes", "Open codes", "annotations:code_list", "view", 55),
            ("analytics", "Analytics", "annotations:dashboard", "view", 60),
            ("releases", "Releases", "annotations:release_list", "view", 70),
        ):
            project_tab_register(key=key, label=label, url_name=url_name, capability=capability, order=order)
