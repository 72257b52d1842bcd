"""Fixtures for the import tests: the demo traces, hand-written fixtures, row counts."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_DATA = REPO / "traces" / "demo_data"
IMPORT_FIXTURES = REPO / "tests" / "fixtures" / "import"


@pytest.fixture
def demo_data() -> Path:
    return DEMO_DATA


@pytest.fixture
def import_fixtures() -> Path:
    return IMPORT_FIXTURES


@pytest.fixture
def row_counts():
    """row_counts() -> the number of rows an import can write, to compare before and after."""
    from annotations.models import Annotation, ModeLabel
    from traces.models import Step, Trace

    def count() -> dict[str, int]:
        return {m.__name__: m.objects.count() for m in (Trace, Step, Annotation, ModeLabel)}

    return count
