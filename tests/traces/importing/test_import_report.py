"""The per-file import report, refusals that store nothing, and merged sources (issue 17)."""

from __future__ import annotations

import json
import shutil

import pytest

from annotations.labels.imported import MAST_DATA_RATER
from annotations.models import Annotation, ModeLabel
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Trace, TraceSource

pytestmark = pytest.mark.django_db

CHATDEV = "chatdev/Weather_CLI_DemoOrg_20261130090000"


def _upload(tmp_path, demo_data, import_fixtures, *extra: str):
    """The files of one web upload (one folder): a ChatDev run, an unrelated OpenManus .md, more."""
    for f in (demo_data / CHATDEV).iterdir():
        shutil.copy(f, tmp_path / f.name)
    meta = (tmp_path / "meta.txt").read_text(encoding="utf-8")
    (tmp_path / "meta.txt").write_text(meta + "\nModel:\nModelType.GPT_4O\n", encoding="utf-8")
    shutil.copy(demo_data / "openmanus/demo_openmanus.log", tmp_path / "openmanus_notes.md")
    for name in extra:
        shutil.copy(import_fixtures / name, tmp_path / name)
    return sorted(tmp_path.iterdir())


def test_every_file_of_a_mixed_upload_gets_one_line(project, tmp_path, demo_data, import_fixtures):
    files = _upload(tmp_path, demo_data, import_fixtures, "claude_session.jsonl", "autogen_taskresult.json")
    result = traces_import(project=project, paths_or_files=files)

    lines = {line["file"].rsplit("/", 1)[-1]: line for line in result.files}
    assert len(result.files) == len(files)
    assert result.imported == 4
    assert lines["openmanus_notes.md"]["status"] == "imported"  # not dropped as a ChatDev artifact
    assert (lines["openmanus_notes.md"]["format"], lines["openmanus_notes.md"]["agents"]) == (
        "OpenManus log",
        ["Manus"],
    )
    log = lines["Weather_CLI_DemoOrg_20261130090000.log"]
    assert (log["format"], log["traces"], log["steps"], log["n_agents"]) == ("ChatDev log", 1, 10, 4)
    assert lines["meta.txt"]["status"] == "companion" and "ChatDev run metadata" in lines["meta.txt"]["reason"]
    assert lines["Weather_CLI.prompt"]["status"] == "companion"
    claude = lines["claude_session.jsonl"]
    assert (claude["format"], claude["steps"], claude["agents"]) == (
        "Claude session JSONL",
        19,
        ["user", "Claude", "test-finder"],
    )
    assert lines["autogen_taskresult.json"]["n_agents"] == 5
    chatdev = Trace.objects.get(project=project, format="chatdev")
    assert chatdev.llm_name == "GPT_4O"  # from meta.txt


def test_a_refused_file_stores_nothing_and_names_every_file(project, tmp_path, import_fixtures, row_counts):
    before = row_counts()
    files = [import_fixtures / n for n in ("claude_session.jsonl", "not_objects.json", "not_json.json")]
    with pytest.raises(TraceImportError) as err:
        traces_import(project=project, paths_or_files=files)
    assert row_counts() == before
    assert "2 files were refused" in str(err.value)
    by_name = {line["file"].rsplit("/", 1)[-1]: line for line in err.value.files}
    assert by_name["not_objects.json"]["status"] == "refused"
    assert by_name["not_objects.json"]["reason"] == "record 1: record is null, expected an object"
    assert by_name["not_json.json"]["reason"].startswith("line 1: invalid JSON")
    assert (by_name["claude_session.jsonl"]["status"], by_name["claude_session.jsonl"]["traces"]) == ("not stored", 1)


@pytest.mark.parametrize("name", ["not_objects.json", "not_json.json"])
def test_garbage_alone_is_refused_with_nothing_stored(project, import_fixtures, row_counts, name):
    before = row_counts()
    with pytest.raises(TraceImportError, match=name):
        traces_import(project=project, paths_or_files=[import_fixtures / name])
    assert row_counts() == before


def _mast_record(trace_id, labels, text):
    return {"mas_name": "AppWorld", "llm_name": "GPT-4o", "benchmark_name": "AppWorld", "trace_id": trace_id,
            "trace": {"key": "AppWorld", "index": trace_id, "trajectory": text}, "mast_annotation": labels}  # fmt: skip


def test_same_trajectory_under_another_trace_id_is_merged_with_its_labels(project, tmp_path, demo_data):
    text = (demo_data / "appworld/demo_5e1f0aa_1.txt").read_text(encoding="utf-8")
    path = tmp_path / "mad.jsonl"
    rows = [_mast_record(11, None, text), _mast_record(912, {"1.1": 1, "3.2": 0}, text)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    result = traces_import(project=project, paths_or_files=[path])

    assert (result.imported, result.merged, result.duplicates) == (1, 1, 0)
    trace = Trace.objects.get(project=project)
    assert trace.external_id == "11"
    source = TraceSource.objects.get(trace=trace)
    assert (source.external_id, source.record_number, source.labels) == ("912", 1, {"1.1": 1, "3.2": 0})
    ann = Annotation.objects.get(trace=trace, rater__name=MAST_DATA_RATER)
    assert dict(ModeLabel.objects.filter(annotation=ann).values_list("mode__code", "decision")) == {
        "1.1": ModeLabel.Decision.PRESENT,
        "3.2": ModeLabel.Decision.ABSENT,
    }
    assert result.files[0]["merged"] == 1

    again = traces_import(project=project, paths_or_files=[path])
    assert (again.imported, again.merged, again.duplicates) == (0, 0, 2)  # the same records again: skipped
    assert TraceSource.objects.count() == 1


def test_adamast_labels_are_stored_as_the_mast_data_judge(project, import_fixtures):
    result = traces_import(project=project, paths_or_files=[import_fixtures / "adamast.jsonl"])
    assert result.imported == 3
    trace = Trace.objects.get(project=project, external_id="programdev-v2-17")
    assert (trace.format, trace.mas_name, trace.llm_name, trace.benchmark) == (
        "adamast",
        "ChatDev",
        "GPT-4o",
        "ProgramDev-v2",
    )
    ann = Annotation.objects.get(trace=trace, rater__name=MAST_DATA_RATER)
    assert ModeLabel.objects.filter(annotation=ann, decision=ModeLabel.Decision.PRESENT).count() == 2
    assert (
        result.files[0]["format"]
        == "AdaMAST JSONL (ChatDev log), AdaMAST JSONL (AG2 _human.json / messages), AdaMAST JSONL (AutoGen TaskResult)"
    )


def test_step_details_are_stored(project, import_fixtures):
    result = traces_import(project=project, paths_or_files=[import_fixtures / "claude_session.jsonl"])
    trace = Trace.objects.get(pk=result.trace_ids[0])
    step = trace.steps.get(index=1)
    assert step.details["output_tokens"] == 96 and step.details["model"] == "claude-sonnet-4-5-20250929"
