from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotations"

    def ready(self) -> None:
        # Labels that come with imported records (MAST-Data's mast_annotation) are stored by a
        # hook, so traces never imports annotations.
        # Celery's autodiscovery looks for <app>.tasks only; each area keeps its own tasks module.
        from annotations.judge import tasks as judge_tasks  # noqa: F401
        from annotations.labels.imported import MastDataJudgeHook
        from annotations.releases import tasks as release_tasks  # noqa: F401
        from annotations.rounds.imported import MastHumanRoundsHook
        from traces.importing.hooks import register_import_hook

        register_import_hook(MastDataJudgeHook())
        register_import_hook(MastHumanRoundsHook())  # human-labelled records -> closed calibration rounds
