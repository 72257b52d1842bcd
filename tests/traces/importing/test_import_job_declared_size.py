"""An import job knows its upload's size whatever kind of file object it is given."""

from __future__ import annotations

import pytest
from django.test import override_settings

from traces.importing.jobs import import_job_create
from traces.importing.results import TraceImportError

pytestmark = pytest.mark.django_db


def test_plain_open_files_count_their_bytes(project, manager, import_fixtures, tmp_path):
    path = import_fixtures / "phoenix_spans.jsonl"
    with override_settings(MEDIA_ROOT=str(tmp_path)), open(path, "rb") as f:
        job = import_job_create(project=project, by=manager, files=[f])
    assert job.bytes_total == path.stat().st_size > 0


def test_plain_open_files_meet_the_size_limit(project, manager, import_fixtures, tmp_path, settings):
    path = import_fixtures / "phoenix_spans.jsonl"
    settings.MEDIA_ROOT = str(tmp_path)
    settings.MAST_IMPORT_MAX_FILE_BYTES = 100
    with open(path, "rb") as f, pytest.raises(TraceImportError, match="the limit per file is 100 bytes"):
        import_job_create(project=project, by=manager, files=[f])
