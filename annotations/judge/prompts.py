"""Prompt template versions of a taxonomy version (writes): the active one, and saving an edit.

Runs keep the version they were created with (``JudgeRun.prompt``), so an edit is a new version
and the old ones stay for the runs that used them.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotations.judge import prompting
from annotations.models import PromptTemplate
from taxonomy.models import TaxonomyVersion


def prompt_template_active(*, taxonomy_version: TaxonomyVersion, by=None) -> PromptTemplate:
    """The active prompt of a taxonomy version; version 1 (the default text) is created on first use."""
    current = PromptTemplate.objects.filter(taxonomy_version=taxonomy_version, is_active=True).first()
    if current:
        return current
    with transaction.atomic():
        try:
            with transaction.atomic():
                return PromptTemplate.objects.create(
                    taxonomy_version=taxonomy_version,
                    number=1,
                    text=prompting.DEFAULT_TEMPLATE,
                    notes="Default prompt",
                    created_by=by,
                )
        except IntegrityError:
            return PromptTemplate.objects.get(taxonomy_version=taxonomy_version, is_active=True)


def prompt_template_save(*, taxonomy_version: TaxonomyVersion, text: str, by, notes: str = "") -> PromptTemplate:
    """Save an edited prompt as a new version and make it the active one (old versions stay for old runs)."""
    text = (text or "").replace("\r\n", "\n").strip() + "\n"
    problems = prompting.template_problems(text)
    if problems:
        raise ValidationError({"text": problems})
    with transaction.atomic():
        prompt_template_active(taxonomy_version=taxonomy_version, by=by)
        versions = PromptTemplate.objects.select_for_update().filter(taxonomy_version=taxonomy_version)
        current = [p for p in versions if p.is_active]
        if current and current[0].text == text:
            return current[0]  # nothing changed: no new version
        number = max(p.number for p in versions) + 1
        versions.filter(is_active=True).update(is_active=False)
        return PromptTemplate.objects.create(
            taxonomy_version=taxonomy_version, number=number, text=text, notes=notes[:300], created_by=by
        )


# --------------------------------------------------------------------------- selection
