"""python manage.py import_traces: project creation, summary, progress bar, exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from traces.models import Project, Trace

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.django_db
def test_command_creates_the_project_and_prints_the_summary(mast_version, demo_data):
    out, err = StringIO(), StringIO()
    call_command("import_traces", str(demo_data), project="fresh", name="Fresh one", stdout=out, stderr=err)

    project = Project.objects.get(slug="fresh")
    assert project.name == "Fresh one"
    assert project.taxonomy_version == mast_version
    assert Trace.objects.filter(project=project).count() == 10
    assert "imported 10, merged 0, duplicates skipped 0, failed 0" in out.getvalue()
    assert "100.0%" in err.getvalue()  # the progress bar ends full


@pytest.mark.django_db
def test_command_run_twice_reports_duplicates(project, demo_data):
    call_command("import_traces", str(demo_data / "ag2"), project=project.slug, stdout=StringIO(), stderr=StringIO())
    out = StringIO()
    call_command("import_traces", str(demo_data / "ag2"), project=project.slug, stdout=out, stderr=StringIO())
    assert "imported 0, merged 0, duplicates skipped 1, failed 0" in out.getvalue()


@pytest.mark.django_db
def test_command_fails_with_the_error_and_stores_nothing(project, demo_data, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"run_id": 3, "content": ')
    out = StringIO()
    with pytest.raises(CommandError, match=r"bad\.json, line 1: invalid JSON"):
        call_command("import_traces", str(demo_data), str(bad), project=project.slug, stdout=out, stderr=StringIO())
    assert "failed 1 (nothing was stored)" in out.getvalue()
    assert Trace.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_command_exit_code_is_non_zero_on_failure(project, tmp_path):
    from tests.conftest_paths import subprocess_database_url

    bad = tmp_path / "empty.log"
    bad.write_bytes(b"")
    env = {**os.environ, "DATABASE_URL": subprocess_database_url()}
    proc = subprocess.run(
        [sys.executable, "manage.py", "import_traces", str(bad), "--project", project.slug, "--skip-checks"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "empty.log, line 1: the file is empty" in proc.stderr
