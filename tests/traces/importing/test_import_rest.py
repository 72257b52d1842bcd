"""Import the rest: a JSONL file with broken lines (a session log whose process died mid-write).

All or nothing stays the default: the file is refused, naming it and the line. Asked for (command
flag, API field, the Import tab's checkbox), the good records are stored and the report lists
each skipped line and why; a file whose every line is broken is still refused."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from tests.traces.importing.test_import_job import _wait
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Trace


def _adamast(trace_id: str, answer: str) -> str:
    """One AdaMAST record (trace_id, task, messages, outcome, metadata) as a JSONL line."""
    return json.dumps(
        {
            "trace_id": trace_id,
            "task": "What is 17 * 8?",
            "messages": [{"role": "user", "content": "What is 17 * 8?"}, {"role": "assistant", "content": answer}],
            "outcome": {"status": "failure", "score": 0.0},
            "metadata": {"system": "calculator"},
        }
    )


# the third record was being written when the process died; line 2 is a stray non-JSON line
CUT = "\n".join(
    [_adamast("r1", "126"), "Traceback (most recent call last):", _adamast("r2", "136"), _adamast("r3", "13")[:70]]
)


def _claude_session() -> str:
    """A Claude Code session log (one trace, one record per line) whose last line was cut off."""
    rows = [
        {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "Fix the failing test"}},
        {
            "type": "assistant",
            "sessionId": "s1",
            "message": {"role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": "On it."}]},
        },
        {
            "type": "assistant",
            "sessionId": "s1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Done: the test passes now."}]},
        },
    ]
    lines = [json.dumps(r) for r in rows]
    return "\n".join(lines[:2] + [lines[2][:40]])


def _file(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.django_db
def test_by_default_a_broken_line_refuses_the_file_naming_it_and_the_line(project, tmp_path):
    with pytest.raises(TraceImportError, match=r"run\.jsonl, line 2: invalid JSON"):
        traces_import(project=project, paths_or_files=[_file(tmp_path, "run.jsonl", CUT)])
    assert not Trace.objects.filter(project=project).exists()


@pytest.mark.django_db
def test_import_the_rest_stores_the_good_records_and_lists_each_skipped_line(project, tmp_path):
    result = traces_import(project=project, paths_or_files=[_file(tmp_path, "run.jsonl", CUT)], import_rest=True)

    assert result.imported == 2
    titles = sorted(Trace.objects.filter(project=project).values_list("external_id", flat=True))
    assert titles == ["r1", "r2"]
    (line,) = result.files
    assert [b["line"] for b in line["broken_lines"]] == [2, 4]
    assert all(b["reason"].startswith("invalid JSON") for b in line["broken_lines"])
    for trace in Trace.objects.filter(project=project):
        assert trace.steps.count() == 2 and "unknown" not in trace.raw_text  # nothing invented


@pytest.mark.django_db
def test_a_session_log_cut_off_mid_write_keeps_every_whole_record(project, tmp_path):
    path = _file(tmp_path, "session.jsonl", _claude_session())
    with pytest.raises(TraceImportError, match=r"session\.jsonl, line 3"):
        traces_import(project=project, paths_or_files=[path])

    result = traces_import(project=project, paths_or_files=[path], import_rest=True)
    assert result.imported == 1 and result.files[0]["broken_lines"][0]["line"] == 3
    trace = Trace.objects.get(project=project)
    contents = [s.content for s in trace.steps.order_by("index")]
    assert len(contents) == 2 and "Fix the failing test" in contents[0] and "On it." in contents[1]


@pytest.mark.django_db
def test_mast_data_jsonl_with_a_broken_record_line(project, tmp_path):
    rec = {"mas_name": "ChatDev", "benchmark_name": "ProgramDev", "trace_id": 1, "mast_annotation": {"1.1": 1}}
    good = [json.dumps({**rec, "trace_id": i, "trace": {"key": "k", "index": i, "trajectory": f"run {i}\nok"}})
            for i in range(2)]  # fmt: skip
    path = _file(tmp_path, "mad.jsonl", "\n".join([good[0], '{"mas_name": "ChatDev", "trace', good[1]]))
    with pytest.raises(TraceImportError, match=r"line 2"):
        traces_import(project=project, paths_or_files=[path])
    result = traces_import(project=project, paths_or_files=[path], import_rest=True)
    assert result.imported == 2 and [b["line"] for b in result.files[0]["broken_lines"]] == [2]


@pytest.mark.django_db
def test_a_file_whose_every_line_is_broken_is_still_refused(project, tmp_path):
    path = _file(tmp_path, "junk.jsonl", '{"a": 1,}\n{"b": }\n')
    with pytest.raises(TraceImportError, match=r"junk\.jsonl.*every line is broken \(2\)"):
        traces_import(project=project, paths_or_files=[path], import_rest=True)
    assert not Trace.objects.filter(project=project).exists()


@pytest.mark.django_db
def test_the_command_flag_lists_every_skipped_line(project, tmp_path):
    path = _file(tmp_path, "run.jsonl", CUT)
    with pytest.raises(CommandError, match="line 2"):
        call_command("import_traces", str(path), project=project.slug, no_progress=True, stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_traces", str(path), project=project.slug, no_progress=True, import_the_rest=True, stdout=out)
    text = out.getvalue()
    assert "2 broken lines skipped" in text
    assert re.search(r"skipped line 2: invalid JSON", text) and re.search(r"skipped line 4: invalid JSON", text)
    assert "imported 2," in text


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_api_field_imports_the_rest_in_the_worker(celery_worker_process, project, manager):
    client = APIClient()
    client.force_authenticate(manager)
    url = f"/api/projects/{project.slug}/imports/"
    upload = SimpleUploadedFile("run.jsonl", CUT.encode(), content_type="application/jsonl")
    response = client.post(url, {"files": [upload], "import_rest": "true"}, format="multipart")
    assert response.status_code == 202, response.content
    assert response.json()["import_rest"] is True

    job, _seen = _wait(response.json()["id"])
    assert (job.status, job.n_imported) == ("done", 2), job.error
    detail = client.get(f"{url}{job.pk}/").json()
    assert [b["line"] for b in detail["report"][0]["broken_lines"]] == [2, 4]
