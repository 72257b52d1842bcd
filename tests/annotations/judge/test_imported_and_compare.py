"""Imported raters (command, API, page) and the judge comparison (page, API, CSV, LaTeX)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.judge.imported import rater_import
from annotations.models import Annotation, ModeLabel, Rater
from tests.annotations.conftest import drive, make_judge_traces
from tests.annotations.judge.test_judge_web import closed_round

pytestmark = pytest.mark.django_db


def sourced(project, n):
    traces = make_judge_traces(project, n)
    for i, t in enumerate(traces):
        t.external_id = f"src-{i}"
        t.save(update_fields=["external_id"])
    return traces


def jsonl(rows):
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def test_jsonl_import_files_labels_under_a_named_imported_rater(project, manager):
    traces = sourced(project, 3)
    text = jsonl(
        [
            {
                "source_id": "src-0",
                "modes": {"1.1": True, "2.3": {"present": "yes", "evidence_steps": [1, 2], "rationale": "drift"}},
                "raw_answer": "@@ A. x @@",
            },
            {"content_hash": traces[1].content_hash, "modes": {"1.1": "no", "1.2": ""}},
            {"source_id": "src-2", "1.3": "present", "task_success": "no"},
        ]
    )
    result = rater_import(project=project, by=manager, name="o1 via agentdash", text=text, filename="labels.jsonl")
    assert result.rater.kind == Rater.Kind.IMPORTED and result.n_traces == 3 and result.n_labels == 4
    ann = Annotation.objects.get(rater=result.rater, trace=traces[0])
    assert ann.source["raw_answer"] == "@@ A. x @@" and ann.source["line"] == 1
    lab = ann.labels.get(mode__code="2.3")
    assert lab.decision == "present" and lab.evidence == [{"step": 1}, {"step": 2}] and lab.rationale == "drift"
    # an empty value is unknown: no label at all
    assert not ModeLabel.objects.filter(annotation__trace=traces[1], annotation__rater=result.rater, mode__code="1.2")


def test_csv_import_reads_mode_columns_and_evidence(project, manager):
    sourced(project, 2)
    text = "source_id,1.1,2.3,evidence_2.3,rationale\nsrc-0,no,yes,4 7,drifted\nsrc-1,yes,,,\n"
    result = rater_import(project=project, by=manager, name="lab B", text=text, filename="b.csv")
    assert result.n_traces == 2 and result.n_labels == 3
    lab = ModeLabel.objects.get(
        annotation__rater=result.rater, annotation__trace__external_id="src-0", mode__code="2.3"
    )
    assert lab.evidence == [{"step": 4}, {"step": 7}] and lab.rationale == "drifted"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"source_id": "src-0", "modes": {"1.1": true}}\n{"source_id": "nope", "modes": {"1.1": true}}\n', "line 2"),
        ('{"source_id": "src-0", "modes": {"1.1": "maybe"}}\n', "line 1: mode 1.1"),
        ('{"source_id": "src-0", "modes": {"9.9": true}}\n', "line 1: mode '9.9'"),
        ('{"source_id": "src-0", "modes": {"1.1": true}}\nnot json\n', "line 2: not JSON"),
        ('{"source_id": "src-0", "modes": {"1.1": true}}\n{"source_id": "src-0", "modes": {"1.2": true}}\n', "line 2"),
    ],
)
def test_a_bad_row_refuses_the_file_naming_the_line_and_stores_nothing(project, manager, text, where):
    from django.core.exceptions import ValidationError

    sourced(project, 2)
    with pytest.raises(ValidationError) as exc:
        rater_import(project=project, by=manager, name="bad", text=text, filename="x.jsonl")
    assert any(where in m for m in exc.value.message_dict["file"]), exc.value.message_dict
    assert not Rater.objects.filter(name="bad").exists() and not Annotation.objects.filter(rater__name="bad")


def test_import_command(project, manager, tmp_path):
    sourced(project, 1)
    path = tmp_path / "l.jsonl"
    path.write_text(jsonl([{"source_id": "src-0", "modes": {"1.1": True}}]))
    out = io.StringIO()
    call_command("import_rater", str(path), "--project", project.slug, "--name", "cmd rater", stdout=out)
    assert "Imported 1 labels on 1 traces" in out.getvalue()
    path.write_text(jsonl([{"source_id": "missing", "modes": {"1.1": True}}]))
    with pytest.raises(CommandError, match="line 1: no trace with source_id 'missing'"):
        call_command("import_rater", str(path), "--project", project.slug, "--name", "cmd rater 2")


def test_import_api_and_page(client, project, manager):
    sourced(project, 2)
    client.force_login(manager)
    api = client.post(
        f"/api/projects/{project.slug}/imported-raters/",
        {
            "name": "api rater",
            "content": jsonl([{"source_id": "src-0", "modes": {"1.1": True}}]),
            "filename": "a.jsonl",
        },
        content_type="application/json",
    )
    assert api.status_code == 201 and api.json()["n_traces"] == 1
    bad = client.post(
        f"/api/projects/{project.slug}/imported-raters/",
        {"name": "api bad", "content": "source_id,1.1\nsrc-9,yes\n", "filename": "a.csv"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "line 2" in json.dumps(bad.json())
    from django.core.files.uploadedfile import SimpleUploadedFile

    url = reverse("annotations:judge_imports", args=[project.slug])
    page = client.post(
        url,
        {
            "name": "page rater",
            "format": "auto",
            "file": SimpleUploadedFile("p.csv", b"source_id,1.1\nsrc-1,yes\nsrc-7,no\n"),
        },
    )
    html = page.content.decode()
    assert page.status_code == 200 and "Nothing was stored" in html and "line 3" in html
    assert not Rater.objects.filter(name="page rater").exists()
    listed = client.get(f"/api/projects/{project.slug}/imported-raters/").json()
    assert [r["name"] for r in listed] == ["api rater"]


def _world(project, manager, llm_server):
    from annotations.judge.runs import judge_run_create

    traces = sourced(project, 6)
    rnd = closed_round(project, traces, {t.pk: ({"1.1"} if i % 2 else {"1.2"}) for i, t in enumerate(traces)})
    run = drive(
        judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
        )
    )
    rows = [{"source_id": f"src-{i}", "modes": {"1.1": i % 2 == 1, "1.2": i % 2 == 0, "2.1": False}} for i in range(6)]
    imported = rater_import(project=project, by=manager, name="imported", text=jsonl(rows), filename="i.jsonl")
    return rnd, run, imported.rater


def test_comparison_api_page_and_downloads_show_the_same_numbers(client, project, manager, llm_server, fast_retries):
    rnd, run, rater = _world(project, manager, llm_server)
    client.force_login(manager)
    q = {"s": [f"run:{run.pk}", f"rater:{rater.pk}"], "round": rnd.pk}
    api = client.get(f"/api/projects/{project.slug}/judge-comparison/", q).json()
    imp = api["raters"][1]
    assert imp["pooled"]["kappa"]["value"] == pytest.approx(1.0)  # the imported rater copies the consensus
    assert imp["pooled"]["reliable"] is False  # 6 traces
    llm = api["raters"][0]
    one_two = next(m for m in llm["modes"] if m["code"] == "1.2")
    assert one_two["f1"]["value"] == 0.0  # the scripted judge never says 1.2; the humans did 3 times
    url = reverse("annotations:judge_compare", args=[project.slug])
    html = client.get(url, q).content.decode()
    assert "not reliable 95% intervals" in html and "prediction-powered inference" in html
    rows = list(csv.DictReader(io.StringIO(client.get(url, {**q, "format": "csv"}).content.decode())))
    pooled = {r["rater"]: r for r in rows if r["mode"] == "pooled"}
    for r in api["raters"]:
        k = r["pooled"]["kappa"]
        cell = pooled[r["label"]]
        assert cell["kappa"] == f"{k['value']:.2f}" and cell["kappa_low"] == f"{k['low']:.2f}"
        assert f'>{cell["kappa"]}<div class="ci">[{cell["kappa_low"]}, {cell["kappa_high"]}]' in html
    tex = client.get(url, {**q, "format": "tex"}).content.decode()
    assert r"\begin{tabular}" in tex and f"{pooled['Imported: imported']['kappa']} [" in tex
    assert len(api["pairs"]) == 1


def test_comparison_refuses_unknown_sources(client, project, manager):
    client.force_login(manager)
    bad = client.get(f"/api/projects/{project.slug}/judge-comparison/", {"s": "run:999"})
    assert bad.status_code == 400 and "run:999" in json.dumps(bad.json())


def test_comparison_page_query_count_is_fixed(
    client, project, manager, llm_server, fast_retries, django_assert_num_queries
):
    rnd, run, rater = _world(project, manager, llm_server)
    client.force_login(manager)
    url = reverse("annotations:judge_compare", args=[project.slug])
    q = {"s": [f"run:{run.pk}", f"rater:{rater.pk}"], "round": rnd.pk}
    client.get(url, q)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        client.get(url, q)
    with django_assert_num_queries(len(ctx)):
        client.get(url, q)
    assert len(ctx) <= 30
