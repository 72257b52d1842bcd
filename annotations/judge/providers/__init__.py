"""The judge providers, by the name a run stores in ``JudgeRun.provider``.

Adding one: a module here with a ``base.Provider`` subclass, a line in ``PROVIDERS`` below, its
tests, and its name among ``JudgeRun.Provider``'s choices (a model field: that is a migration).
"""

from __future__ import annotations

from annotations.judge.providers.base import Provider
from annotations.judge.providers.baseline_model import Baseline
from annotations.judge.providers.mast_official import MastOfficial
from annotations.judge.providers.openai_chat import OpenAIChat

PROVIDERS: dict[str, Provider] = {p.name: p for p in (OpenAIChat(), MastOfficial(), Baseline())}


def provider_get(name: str) -> Provider:
    """The provider a run names; KeyError for a name no module registers."""
    return PROVIDERS[name]
