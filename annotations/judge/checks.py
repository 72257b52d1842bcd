"""System checks of the judge's settings: a malformed MAST_JUDGE_API_KEYS stops `manage.py check`
(and so start-up under `runserver`, `migrate`, the test runner) instead of the first judge run."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security)
def check_judge_api_keys(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    # Imported here: the providers package loads the model clients, which Django setup should not.
    from annotations.judge.providers import keys

    try:
        keys.parse_allowed(getattr(settings, keys.SETTING, ""))
    except ValueError as exc:
        return [
            checks.Error(
                str(exc),
                hint="Write it as NAME=https://host/v1[,NAME=URL...]: environment variable names and the base URL "
                "each may be sent to.",
                id="annotations.E001",
            )
        ]
    return []
