from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotations"

    def ready(self) -> None:
        # Labels that come with imported records (MAST-Data's mast_annotation) are stored by a
        # hook, so traces never imports annotations.
        from traces.importing import register_import_hook

        from . import tasks_releases  # noqa: F401  (Celery autodiscovers only tasks.py)
        from .importing import MastDataJudgeHook
        from .rounds_import import MastHumanRoundsHook

        register_import_hook(MastDataJudgeHook())
        register_import_hook(MastHumanRoundsHook())  # human-labelled records -> closed calibration rounds
