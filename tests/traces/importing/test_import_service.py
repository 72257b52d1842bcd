"""traces_import on PostgreSQL: formats, duplicates, folders, zips, MAST-Data labels, bad input."""

from __future__ import annotations

import io
import json
import shutil
import zipfile

import pytest

from annotations.labels.imported import MAST_DATA_RATER
from annotations.models import Annotation, ModeLabel
from traces.importing import hooks
from traces.importing.prep import trace_stats
from traces.importing.results import TraceImportError
from traces.importing.service import traces_import
from traces.models import Step, Trace
from traces.parsers import ParsedStep, ParsedTrace

pytestmark = pytest.mark.django_db

DEMO_FILES = [
    # (path under demo_data, format, framework, steps, agents)
    (
        "chatdev/Weather_CLI_DemoOrg_20261130090000/Weather_CLI_DemoOrg_20261130090000.log",
        "chatdev",
        "ChatDev",
        10,
        ["Chief Product Officer", "Chief Technology Officer", "Programmer", "Code Reviewer"],
    ),
    (
        "metagpt/run_demo_7.json",
        "metagpt_json",
        "MetaGPT",
        6,
        ["Human", "SimpleCoder", "SimpleTester", "SimpleReviewer"],
    ),
    ("ag2/mathchat_demo_human.json", "ag2", "AG2", 6, ["mathproxyagent", "assistant"]),
    ("hyperagent/demo__csvkit-42_human.json", "hyperagent", "HyperAgent", 8, ["Planner", "Navigator", "Editor"]),
    ("appworld/demo_5e1f0aa_1.txt", "appworld", "AppWorld", 14, ["User", "Supervisor", "spotify Agent"]),
    (
        "magentic_one/demo_console_log.txt",
        "magentic_one",
        "Magentic-One",
        9,
        ["user", "MagenticOneOrchestrator", "WebSurfer"],
    ),
    ("openmanus/demo_openmanus.log", "openmanus", "OpenManus", 16, ["Manus"]),
]


@pytest.mark.parametrize(("path", "fmt", "framework", "n_steps", "agents"), DEMO_FILES, ids=[f[1] for f in DEMO_FILES])
def test_each_format_imports_with_its_agents_and_steps(project, demo_data, path, fmt, framework, n_steps, agents):
    result = traces_import(project=project, paths_or_files=[demo_data / path])

    assert (result.imported, result.duplicates) == (1, 0)
    trace = Trace.objects.get(pk=result.trace_ids[0])
    assert (trace.format, trace.mas_name, trace.n_steps, trace.agents) == (fmt, framework, n_steps, agents)
    steps = list(trace.steps.order_by("index"))
    assert [s.index for s in steps] == list(range(n_steps))
    assert all(s.line_start <= s.line_end <= trace.n_lines for s in steps)
    # a step's content is exactly its lines of the raw text
    lines = trace.raw_text.split("\n")
    assert steps[1].content == "\n".join(lines[steps[1].line_start - 1 : steps[1].line_end])


def test_chatdev_folder_takes_the_task_from_prompt_and_metadata_from_meta_txt(project, demo_data):
    result = traces_import(project=project, paths_or_files=[demo_data / "chatdev"])

    assert result.imported == 1  # the .prompt and meta.txt are not traces of their own
    trace = Trace.objects.get()
    assert trace.task.startswith("Build a command-line tool that prints tomorrow's forecast")
    assert trace.metadata["chatdev_meta"]["Language"] == "Python"
    assert trace.title == "Weather_CLI"


def test_stats_count_agents_switches_and_repeated_steps(project, demo_data):
    traces_import(project=project, paths_or_files=[demo_data / "openmanus"])

    trace = Trace.objects.get()
    # the same think / tool call / result repeated five times: 4 x 3 repeats, minus the last
    # step, whose step counter is all that differs (digits are normalised away)
    assert trace.n_repeated_steps == 11
    assert (trace.n_agents, trace.n_agent_switches) == (1, 0)
    assert trace.n_chars == len(trace.raw_text)
    assert trace.n_lines == trace.raw_text.count("\n") + 1


def test_stats_treat_whitespace_and_digit_changes_as_repeats():
    steps = [
        ParsedStep(0, "a", "message", "[09:00] hello   world", 1, 1),
        ParsedStep(1, "b", "message", "[09:01] hello world", 2, 2),
        ParsedStep(2, "a", "message", "something else", 3, 3),
    ]
    stats = trace_stats(ParsedTrace(format="plaintext", raw_text="x\ny\nz", steps=steps))
    assert stats["n_repeated_steps"] == 1
    assert stats["n_agent_switches"] == 2
    assert stats["agents"] == ["a", "b"]


def test_reimport_skips_duplicates(project, demo_data):
    first = traces_import(project=project, paths_or_files=[demo_data])
    second = traces_import(project=project, paths_or_files=[demo_data])

    assert first.imported == 10
    assert (second.imported, second.duplicates) == (0, 10)
    assert Trace.objects.filter(project=project).count() == 10


def test_stored_duplicates_are_looked_up_a_group_of_records_at_a_time(project, tmp_path):
    """600 records, the first 300 stored by an earlier import, one sent twice, one the same text under
    another id: every outcome right, with one lookup query per group of records, not one per record."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def record(i, trace_id=None):
        return {"mas_name": "AG2", "trace_id": trace_id or i, "trace": {"trajectory": f"run {i}: the agent answered"}}

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(record(i)) + "\n" for i in range(300)))
    rows = [record(i) for i in range(600)] + [record(450), record(7, trace_id=9_007)]
    second.write_text("".join(json.dumps(r) + "\n" for r in rows))
    traces_import(project=project, paths_or_files=[first])
    with CaptureQueriesContext(connection) as ctx:
        result = traces_import(project=project, paths_or_files=[second])

    assert (result.imported, result.duplicates, result.merged) == (300, 301, 1)
    assert Trace.objects.filter(project=project).count() == 600
    lookups = [q["sql"] for q in ctx.captured_queries if '"traces_trace"."content_hash" ' in q["sql"]]
    assert 1 <= len(lookups) <= 4, len(lookups)  # 602 records in groups of 256 (and the merged source's id)


def test_the_same_trace_in_another_project_is_not_a_duplicate(project, demo_data):
    from tests.factories import ProjectFactory

    other = ProjectFactory(slug="other")
    traces_import(project=project, paths_or_files=[demo_data / "openmanus"])
    result = traces_import(project=other, paths_or_files=[demo_data / "openmanus"])
    assert result.imported == 1


def test_folder_import_is_recursive(project, demo_data):
    result = traces_import(project=project, paths_or_files=[demo_data])

    assert result.imported == 10
    assert set(Trace.objects.values_list("mas_name", flat=True)) == {
        "ChatDev",
        "MetaGPT",
        "AG2",
        "HyperAgent",
        "AppWorld",
        "Magentic-One",
        "OpenManus",
    }


def test_zip_import_reads_members_and_groups_chatdev_runs(project, demo_data, tmp_path):
    archive = tmp_path / "traces.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in demo_data.rglob("*"):
            if path.is_file():
                zf.write(path, path.relative_to(demo_data))
    result = traces_import(project=project, paths_or_files=[archive])

    assert result.imported == 10
    chatdev = Trace.objects.get(format="chatdev", title="Weather_CLI")
    assert chatdev.task.startswith("Build a command-line tool")
    assert chatdev.metadata["source_file"].startswith("traces.zip:chatdev/")


def test_uploaded_file_objects_import_like_paths(project, import_fixtures):
    data = (import_fixtures / "team_chat.jsonl").read_bytes()
    upload = io.BytesIO(data)
    upload.name = "team_chat.jsonl"
    result = traces_import(project=project, paths_or_files=[upload])

    trace = Trace.objects.get(pk=result.trace_ids[0])
    assert (trace.format, trace.agents, trace.n_steps) == ("messages_json", ["planner", "writer"], 4)
    assert trace.n_repeated_steps == 1


def test_mast_data_file_stores_the_judge_raters_labels(project, demo_data):
    result = traces_import(project=project, paths_or_files=[demo_data / "mast_data" / "demo_mast_data.json"])

    assert result.imported == 3
    annotations = Annotation.objects.filter(rater__name=MAST_DATA_RATER).select_related("rater")
    assert annotations.count() == 3
    ann = annotations.get(trace__external_id="9002")
    assert ann.rater.kind == "imported"
    assert ann.state == "submitted"
    assert ann.taxonomy_version == project.taxonomy_version
    assert ann.source == {"file": "demo_mast_data.json", "record": 1}
    labels = dict(ModeLabel.objects.filter(annotation=ann).values_list("mode__code", "decision"))
    assert len(labels) == 13  # 3.3 is null in the record: no label for that mode
    assert "3.3" not in labels
    assert labels["1.5"] == "present"
    assert labels["1.1"] == "absent"
    trace = ann.trace
    assert (trace.mas_name, trace.llm_name, trace.benchmark) == ("AppWorld", "GPT-4o", "AppWorld")


def test_reimporting_mast_data_adds_no_second_judge_annotation(project, demo_data):
    path = demo_data / "mast_data" / "demo_mast_data.json"
    traces_import(project=project, paths_or_files=[path])
    traces_import(project=project, paths_or_files=[path])
    assert Annotation.objects.filter(rater__name=MAST_DATA_RATER).count() == 3


class _Recorder:
    def __init__(self):
        self.traces, self.finished = [], 0

    def on_trace(self, *, batch, trace_id, parsed, extra):
        self.traces.append((trace_id, extra))

    def on_finish(self, *, batch):
        self.finished += 1


def test_hooks_receive_round_and_annotations_of_human_labelled_records(project, import_fixtures, monkeypatch):
    recorder = _Recorder()
    monkeypatch.setattr(hooks, "_HOOKS", [*hooks._HOOKS, recorder])

    result = traces_import(project=project, paths_or_files=[import_fixtures / "human_labelled.json"])

    assert recorder.finished == 1
    [(trace_id, extra)] = recorder.traces
    assert trace_id == result.trace_ids[0]
    assert extra["round"] == "Round 1"
    assert extra["annotations"][0]["annotator_1"] == 1
    assert (extra["source_file"], extra["record_number"]) == ("human_labelled.json", 0)
    assert Trace.objects.get(pk=trace_id).mas_name == "MetaGPT"


def test_a_failing_hook_rolls_back_the_whole_import(project, demo_data, monkeypatch, row_counts):
    class Boom(_Recorder):
        def on_finish(self, *, batch):
            raise RuntimeError("hook failed")

    monkeypatch.setattr(hooks, "_HOOKS", [*hooks._HOOKS, Boom()])
    before = row_counts()
    with pytest.raises(RuntimeError):
        traces_import(project=project, paths_or_files=[demo_data])
    assert row_counts() == before


# ---------------------------------------------------------------- bad input: all or nothing


def _bomb(path, size=4 * 1024**2):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb.txt", b"0" * size)


def _traversal(path, name="../evil.log"):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fine.log", "hello\n")
        zf.writestr(name, "[2026-30-11 09:00:00 INFO] Programmer: hi\n")


BAD_INPUTS = {
    # name: (file name, bytes or builder, expected fragments of the message)
    "bad_json": (
        "broken.json",
        b'[\n{"role": "user", "content": "a"},\n{"role": "user" "content": "b"}\n]',
        ["broken.json", "line 3", "invalid JSON"],
    ),
    "bad_jsonl_record": (
        "records.jsonl",
        b'{"mas_name": "AG2", "trace_id": 1, "trace": {"trajectory": "hello"}}\n{"mas_name": "AG2", "trace": {oops}\n',
        ["records.jsonl", "record 2", "line 2"],
    ),
    "truncated_mast_data": (
        "mad.json",
        b'[\n {"mas_name": "AG2", "trace_id": 1, "trace": {"trajectory": "one"}},\n'
        b' {"mas_name": "AG2", "trace_id": 2, "trace": {"trajectory": "tw',
        ["mad.json", "record 2", "line 3", "truncated"],
    ),
    "binary": ("image.log", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, ["image.log", "binary"]),
    "not_utf8": (
        "latin1.txt",
        "first line\nsecond line caf\xe9\n".encode("latin-1"),
        ["latin1.txt", "line 2", "not UTF-8"],
    ),
    "empty": ("empty.log", b"", ["empty.log", "empty"]),
    "blank": ("blank.log", b"  \n\n \n", ["blank.log", "empty"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_file_refuses_the_whole_import_naming_file_and_place(project, demo_data, tmp_path, row_counts, case):
    name, data, fragments = BAD_INPUTS[case]
    folder = tmp_path / "upload"
    shutil.copytree(demo_data / "openmanus", folder)  # a good trace that must not be stored either
    (folder / f"zz_{name}").write_bytes(data)
    before = row_counts()

    with pytest.raises(TraceImportError) as exc:
        traces_import(project=project, paths_or_files=[folder])

    message = str(exc.value)
    for fragment in fragments:
        assert fragment.replace(name, f"zz_{name}") in message
    assert row_counts() == before


def test_file_over_the_size_limit_is_refused(project, import_fixtures, tmp_path, settings, row_counts):
    settings.MAST_IMPORT_MAX_FILE_BYTES = 1000
    big = tmp_path / "big.log"
    big.write_text("line\n" * 400)
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"big\.log: 2,000 bytes; the limit per file is 1,000 bytes"):
        traces_import(project=project, paths_or_files=[import_fixtures / "team_chat.jsonl", big])
    assert row_counts() == before


def test_zip_bomb_by_compression_ratio_is_refused(project, tmp_path, row_counts):
    archive = tmp_path / "bomb.zip"
    _bomb(archive)
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"bomb\.zip:bomb\.txt: compression ratio \d+:1 is over the limit"):
        traces_import(project=project, paths_or_files=[archive])
    assert row_counts() == before


def test_zip_bomb_by_total_size_is_refused(project, tmp_path, settings, row_counts):
    settings.MAST_IMPORT_MAX_TOTAL_BYTES = 10_000
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(5):
            zf.writestr(f"t{i}.log", f"trace {i}\n" + "x" * 3000)
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"many\.zip:t3\.log: the zip expands to more than 10,000 bytes"):
        traces_import(project=project, paths_or_files=[archive])
    assert row_counts() == before


def test_zip_with_too_many_members_is_refused(project, tmp_path, settings):
    settings.MAST_IMPORT_MAX_ZIP_MEMBERS = 3
    archive = tmp_path / "crowd.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(4):
            zf.writestr(f"t{i}.log", f"trace {i}\n")
    with pytest.raises(TraceImportError, match=r"crowd\.zip: the zip has 4 members; the limit is 3"):
        traces_import(project=project, paths_or_files=[archive])


@pytest.mark.parametrize("member", ["../evil.log", "/etc/evil.log", "runs/../../evil.log", "C:\\evil.log"])
def test_zip_member_with_path_traversal_is_refused(project, tmp_path, row_counts, member):
    archive = tmp_path / "sneaky.zip"
    _traversal(archive, member)
    before = row_counts()
    with pytest.raises(TraceImportError) as exc:
        traces_import(project=project, paths_or_files=[archive])
    assert f"sneaky.zip: unsafe path in zip member {member!r}" in str(exc.value)
    assert row_counts() == before


def test_corrupt_zip_is_refused(project, tmp_path):
    archive = tmp_path / "corrupt.zip"
    archive.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TraceImportError, match=r"corrupt\.zip: not a readable zip file"):
        traces_import(project=project, paths_or_files=[archive])


def test_unknown_format_name_is_refused(project, demo_data):
    with pytest.raises(TraceImportError, match=r"unknown format 'word'"):
        traces_import(project=project, paths_or_files=[demo_data / "ag2"], format="word")


def test_forcing_a_json_format_on_a_text_log_names_the_file(project, demo_data):
    with pytest.raises(TraceImportError, match=r"demo_openmanus\.log, line 1: format ag2 expects JSON"):
        traces_import(project=project, paths_or_files=[demo_data / "openmanus"], format="ag2")


def test_missing_path_is_refused(project, tmp_path):
    with pytest.raises(TraceImportError, match="no such file or folder"):
        traces_import(project=project, paths_or_files=[tmp_path / "nope"])


def test_bad_mast_annotation_value_names_the_record(project, tmp_path, row_counts):
    path = tmp_path / "mad.jsonl"
    good = {"mas_name": "AG2", "trace_id": 1, "trace": {"trajectory": "one"}, "mast_annotation": {"1.1": 1}}
    bad = {"mas_name": "AG2", "trace_id": 2, "trace": {"trajectory": "two"}, "mast_annotation": {"1.1": 7}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"mad\.jsonl, record 2.*is not 0, 1 or null"):
        traces_import(project=project, paths_or_files=[path])
    assert row_counts() == before


def test_steps_are_written_with_stable_order_and_ids(project, demo_data):
    result = traces_import(project=project, paths_or_files=[demo_data / "appworld"])
    steps = list(Step.objects.filter(trace_id=result.trace_ids[0]).order_by("index"))
    assert [s.pk for s in steps] == sorted(s.pk for s in steps)


def test_zip_member_whose_header_lies_about_its_size_is_refused(project, tmp_path, row_counts):
    import struct

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("liar.log", b"A" * 100_000)
    data = bytearray(buf.getvalue())
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, 22, 1000)  # local header: uncompressed size
    struct.pack_into("<I", data, central + 24, 1000)  # central directory: the same
    archive = tmp_path / "liar.zip"
    archive.write_bytes(bytes(data))
    before = row_counts()
    with pytest.raises(TraceImportError, match=r"liar\.zip:liar\.log: cannot read the file \(Bad CRC-32"):
        traces_import(project=project, paths_or_files=[archive])
    assert row_counts() == before


def test_lone_surrogate_escapes_in_a_record_are_stored_as_replacement_characters(project, tmp_path):
    path = tmp_path / "surrogate.jsonl"
    path.write_text('{"mas_name": "AG2", "trace_id": 5, "trace": {"trajectory": "hello \\ud800 world\\nnext"}}\n')

    result = traces_import(project=project, paths_or_files=[path])

    trace = Trace.objects.get(pk=result.trace_ids[0])
    assert trace.raw_text == "hello \ufffd world\nnext"
    assert trace.metadata["surrogates_replaced"] == 1
    assert trace.steps.get().content.startswith("hello \ufffd world")


def test_the_real_shared_samples_import_whole(project, shared_dir):
    result = traces_import(
        project=project, paths_or_files=[shared_dir / "mast" / "traces", shared_dir / "mast" / "human_annotations"]
    )

    assert result.imported > 100
    chatdev = Trace.objects.filter(format="chatdev", metadata__mad_record__isnull=True)
    assert chatdev.count() == 6  # one per WareHouse folder: configs, meta.txt and .prompt are not traces
    assert all(t.task for t in chatdev)
    assert Trace.objects.filter(metadata__round__isnull=False).exists()  # the human-labelled records


def test_a_chatdev_run_uploaded_beside_other_logs_keeps_its_prompt_to_itself(project, demo_data, tmp_path):
    folder = tmp_path / "upload"
    shutil.copytree(demo_data / "chatdev" / "Weather_CLI_DemoOrg_20261130090000", folder)
    shutil.copy(demo_data / "openmanus" / "demo_openmanus.log", folder)
    (folder / "main.py").write_text("print('generated code, not a trace')\n")

    result = traces_import(project=project, paths_or_files=[folder])

    assert result.imported == 2  # main.py, the .prompt and meta.txt are not traces
    chatdev = Trace.objects.get(format="chatdev")
    openmanus = Trace.objects.get(format="openmanus")
    assert chatdev.task.startswith("Build a command-line tool")
    assert openmanus.task == ""
    assert "chatdev_meta" not in openmanus.metadata


def test_a_folder_of_a_run_skips_its_readme_and_code_with_a_line_saying_so(project, demo_data, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_data / "openmanus", run)
    (run / "README.md").write_text("# Our run\n\nWe ran OpenManus on GAIA.\n\nSee MANIFEST.md.\n")
    (run / "MANIFEST.md").write_text("files:\n- the log\n")
    (run / "plot.py").write_text("import matplotlib\nprint('plot')\n")
    result = traces_import(project=project, paths_or_files=[run])
    assert result.imported == 1 and Trace.objects.filter(project=project).count() == 1
    lines = {line["file"].rsplit("/", 1)[-1]: line for line in result.files}
    for name, what in (("README.md", "documentation"), ("MANIFEST.md", "documentation"), ("plot.py", "code")):
        assert lines[name]["status"] == "companion" and lines[name]["reason"].startswith(f"skipped: {what}")
    # on its own, or asked for as plain text, the same README is a trace
    assert traces_import(project=project, paths_or_files=[run / "README.md"]).imported == 1
