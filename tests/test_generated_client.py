"""A client generated from our OpenAPI schema works: every operation, uploads and downloads included.

`openapi-python-client` (the generator most Python users reach for) builds a client from the schema
the server serves; the test imports every operation module it wrote (a module that fails to import
is a schema defect: two request bodies on one operation, a file typed as a URI) and then calls every
operation once, as a user would, against a live server with a real Celery worker and the local
OpenAI-protocol server as the judge. The zip download is documented as `application/zip`; the
generator's config maps it to its binary type (`File`).
"""

from __future__ import annotations

import importlib
import io
import json
import pkgutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.annotations.conftest import make_judge_traces
from tests.llm_server import LLMServer
from traces.models import Trace

REPO = Path(__file__).resolve().parent.parent
GENERATOR_CONFIG = "content_type_overrides:\n  application/zip: application/octet-stream\npost_hooks: []\n"


@pytest.fixture
def generated(tmp_path, live_server, settings):
    """The client package generated from the schema the live server serves, imported."""
    from django.core.management import call_command

    schema = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(schema))
    (tmp_path / "config.yaml").write_text(GENERATOR_CONFIG)
    out = tmp_path / "mast_client"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "openapi-python-client"), "generate", "--path", str(schema),
         "--meta", "none", "--config", str(tmp_path / "config.yaml"), "--output-path", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout, result.stdout  # nothing of the schema was left out
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("mast_client")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "mast_client" or m.startswith("mast_client.")]:
            del sys.modules[name]


def _operations(package) -> dict[str, object]:
    """Every operation module of the generated client, imported (a failure names the module)."""
    api = importlib.import_module(f"{package.__name__}.api")
    found = {}
    for group in pkgutil.iter_modules(api.__path__):
        sub = importlib.import_module(f"{api.__name__}.{group.name}")
        for op in pkgutil.iter_modules(sub.__path__):
            found[op.name] = importlib.import_module(f"{sub.__name__}.{op.name}")
    return found


class Caller:
    """Calls operations by name and keeps which were called."""

    def __init__(self, ops: dict, models, client):
        self.ops, self.models, self.client, self.called = ops, models, client, set()

    def __call__(self, name: str, *args, ok=(200, 201, 202, 204), as_client=None, **kwargs):
        response = self.ops[name].sync_detailed(*args, client=as_client or self.client, **kwargs)
        self.called.add(name)
        assert response.status_code in ok, (name, response.status_code, response.content[:500])
        return response

    def body(self, model: str, data: dict):
        return getattr(self.models, model).from_dict(data)


def _wait(predicate, what: str, timeout: float = 60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_every_operation_of_the_generated_client_works(
    generated, live_server, celery_worker_process, project, manager, annotator, annotator2, settings
):
    settings.MAST_API_TOKEN_RATE = ""
    from mast_client import AuthenticatedClient
    from mast_client import models as m
    from mast_client.types import File

    ops = _operations(generated)
    assert len(ops) >= 60
    token = {u: Token.objects.get_or_create(user=u)[0].key for u in (manager, annotator, annotator2)}
    as_manager = AuthenticatedClient(base_url=live_server.url, token=token[manager], prefix="Token", timeout=60)
    as_annotator = AuthenticatedClient(base_url=live_server.url, token=token[annotator], prefix="Token", timeout=60)
    as_annotator2 = AuthenticatedClient(base_url=live_server.url, token=token[annotator2], prefix="Token", timeout=60)
    call = Caller(ops, m, as_manager)
    slug = project.slug
    version = project.taxonomy_version_id

    # the taxonomy and the project
    call("taxonomy_versions_list")
    call("taxonomy_versions_retrieve", version)
    call("projects_list")
    call("projects_retrieve", slug)
    call("projects_partial_update", slug, body=call.body("PatchedProjectSettingsInRequest", {"description": "gen"}))
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("newcomer", password="x-long-password-1")
    call("projects_members_create", slug, body=call.body("MemberInRequest", {"username": "newcomer", "role": "viewer"}))
    call("projects_members_list", slug)

    # an import: a multipart upload, run by the worker; a broken file fails and can be retried
    line = {"task": "gen client", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
                                                                                  "content": "done"}]}
    upload = File(payload=io.BytesIO(json.dumps(line).encode()), file_name="chat.json", mime_type="application/json")
    job = call("projects_imports_create", slug, body=m.ImportJobInRequest(files=[upload])).parsed
    _wait(lambda: call("projects_imports_retrieve", slug, job.id).parsed.status.value in ("done", "failed"), "import")
    call("projects_imports_list", slug)
    bad = File(payload=io.BytesIO(b"{not json"), file_name="broken.json", mime_type="application/json")
    failed = call("projects_imports_create", slug, body=m.ImportJobInRequest(files=[bad])).parsed
    _wait(lambda: call("projects_imports_retrieve", slug, failed.id).parsed.status.value == "failed", "failure")
    call("projects_imports_retry_create", slug, failed.id, ok=(202, 400, 409))

    # reading traces
    traces = make_judge_traces(project, 4)
    for t in traces:
        Trace.objects.filter(pk=t.pk).update(external_id=f"src-{t.pk}")
    first = traces[0].pk
    call("projects_traces_list", slug)
    call("projects_traces_retrieve", slug, first)
    call("projects_traces_outline_retrieve", slug, first)
    call("projects_traces_raw_retrieve", slug, first)
    call("projects_traces_steps_retrieve", slug, first)
    call("projects_traces_search_retrieve", slug, first, q="step")

    # labelling outside a round: save, submit, reopen, history
    from taxonomy.models import FailureMode

    codes = list(FailureMode.objects.filter(version_id=version).values_list("code", flat=True))

    def labels(present: str) -> list[dict]:
        return [{"code": c, "decision": present if c == "1.1" else "absent", "rationale": "gen"} for c in codes]

    state = {"revision": 0, "task_success": "no", "labels": labels("present")}
    saved = call("projects_traces_annotation_update", slug, first, body=call.body("AnnotationInRequest", state))
    call("projects_traces_annotation_retrieve", slug, first)

    def revision_body(revision: int):
        return call.body("SubmitInRequest", {"revision": revision})

    submitted = call("projects_traces_annotation_submit_create", slug, first, body=revision_body(saved.parsed.revision))
    call("projects_traces_annotation_reopen_create", slug, first, body=revision_body(submitted.parsed.revision))
    call("projects_traces_annotation_history_list", slug, first)
    call("projects_traces_annotations_list", slug, first)
    assert saved.parsed.revision >= 1
    call("projects_open_codes_list", slug)

    # a round: preview, create, open, two raters label, review, adjudicate, comment, close
    ids = [t.pk for t in traces[:2]]
    call("projects_rounds_preview_create", slug, body=call.body("RoundSampleInRequest", {"method": "manual",
                                                                                          "trace_ids": ids}))
    rnd = call("projects_rounds_create", slug, body=call.body("RoundCreateInRequest", {
        "name": "gen round", "taxonomy_version": version, "annotators": [annotator.username, annotator2.username],
        "method": "manual", "trace_ids": ids})).parsed
    call("projects_rounds_list", slug)
    call("rounds_retrieve", rnd.id)
    call("rounds_transition_create", rnd.id, body=call.body("RoundTransitionInRequest", {"to": "open"}))
    call("rounds_assignments_list", rnd.id)
    call("queue_list", as_client=as_annotator)
    for who, decision in ((as_annotator, "present"), (as_annotator2, "absent")):
        for tid in ids:
            body = call.body("AnnotationInRequest", {"revision": 0, "task_success": "no", "labels": labels(decision)})
            done = call("projects_traces_annotation_update", slug, tid, as_client=who, body=body, round_=rnd.id)
            call("projects_traces_annotation_submit_create", slug, tid, as_client=who, round_=rnd.id,
                 body=revision_body(done.parsed.revision))
    call("rounds_transition_create", rnd.id, body=call.body("RoundTransitionInRequest", {"to": "review"}))
    call("rounds_agreement_retrieve", rnd.id)
    call("rounds_disagreements_list", rnd.id)
    for tid in ids:
        call("rounds_adjudications_create", rnd.id, body=call.body("RoundAdjudicationInRequest", {
            "trace_id": tid, "mode": "1.1", "decision": "present", "note": "gen"}))
    call("rounds_adjudications_list", rnd.id)
    call("rounds_comments_create", rnd.id, body=call.body("RoundCommentInRequest", {
        "trace_id": ids[0], "mode": "1.1", "body": "agreed"}))
    call("rounds_comments_list", rnd.id)
    call("rounds_transition_create", rnd.id, body=call.body("RoundTransitionInRequest", {"to": "closed",
                                                                                        "with_majority": True}))
    call("projects_agreed_labels_list", slug)
    call("projects_analytics_framework_modes_retrieve", slug)
    compared = call("projects_experiments_compare_retrieve", slug, a="mas_name:ChatDev", b="llm_name:gpt-4o").parsed
    assert compared is not None
    call("projects_monitoring_retrieve", slug, bucket=m.ProjectsMonitoringRetrieveBucket("day"))
    call("projects_alert_rules_create", slug, body=call.body("AlertRuleRequest", {
        "name": "gen", "kind": "level", "target": "1.1", "level": 0.5}))  # fmt: skip
    call("projects_alert_rules_list", slug)
    call("projects_webhooks_create", slug, body=call.body("WebhookRequest", {"url": "http://127.0.0.1:9/gen"}))
    hooks = call("projects_webhooks_list", slug).parsed
    call("projects_alert_events_list", slug)
    call("projects_webhooks_destroy", slug, hooks[0].id)
    call("projects_ingest_keys_create", slug, body=call.body("IngestKeyRequest", {"name": "gen exporter"}))
    keys = call("projects_ingest_keys_list", slug).parsed
    call("projects_ingest_keys_revoke_create", slug, keys[0].id)
    call("projects_live_retrieve", slug)
    call("projects_live_flush_create", slug)
    call("projects_live_policy_retrieve", slug)
    from traces.search.indexing import steps_index_pending

    steps_index_pending()  # the workers' sweep would, within MAST_JOB_SWEEP_SECONDS
    found = call("projects_search_retrieve", slug, q="Planner").parsed
    assert found is not None
    made = call("projects_search_actions_create", slug, body=call.body("SearchActionInRequest", {
        "do": "code", "name": "gen code", "q": "Planner"})).parsed  # fmt: skip
    call("projects_search_actions_list", slug)
    call("projects_search_actions_undo_create", slug, made["id"])

    # a rater's labels from a file (multipart upload)
    lines = "\n".join(json.dumps({"source_id": f"src-{t.pk}", "modes": {"1.1": True}}) for t in traces)
    rater_file = File(payload=io.BytesIO(lines.encode()), file_name="lab.jsonl", mime_type="application/jsonl")
    call("projects_imported_raters_create", slug, body=m.ImportedRaterFileInRequest(name="lab", file=rater_file))
    call("projects_imported_raters_list", slug)

    # a judge: connection, prompt, run on the worker against the local OpenAI-protocol server
    llm = LLMServer().start()
    try:
        conn = call("projects_judge_connections_create", slug, body=call.body("ConnectionInRequest", {
            "name": "local", "base_url": llm.url, "models": ["gen-model"]})).parsed
        call("projects_judge_connections_list", slug)
        call("projects_judge_connections_retrieve", slug, conn.id)
        call("projects_judge_connections_update", slug, conn.id, body=call.body("ConnectionInRequest", {
            "name": "local server", "base_url": llm.url, "models": ["gen-model"]}))
        call("projects_judge_connections_test_create", slug, conn.id, body=call.body("ProbeInRequest", {}))
        call("projects_judge_prompts_create", slug, body=call.body("PromptInRequest", {"text": "Label {trace}."}),
             ok=(201, 400))
        call("projects_judge_prompts_list", slug)
        for _ in range(2):  # twice, the second a new draw: self-agreement needs two runs
            run = call("projects_judge_runs_create", slug, body=call.body("JudgeRunInRequest", {
                "provider": "openai", "connection": conn.id, "model": "gen-model", "concurrency": 2,
                "use_cache": False})).parsed
            _wait(lambda r=run: call("projects_judge_runs_retrieve", slug, r.id).parsed.state in ("done", "failed"),
                  "the judge run", timeout=90)
        call("projects_judge_runs_list", slug)
        call("projects_judge_runs_items_list", slug, run.id)
        call("projects_judge_runs_quality_retrieve", slug, run.id)
        call("projects_judge_runs_reliability_retrieve", slug, run.id)
        call("projects_judge_runs_cancel_create", slug, run.id, ok=(200, 202, 409))
        call("projects_judge_runs_resume_create", slug, run.id, ok=(200, 202, 409))
        call("projects_judge_comparison_retrieve", slug, s=[f"run:{run.id}"])
        seek = {"q": "Planner", "connection": conn.id, "model": "gen-model", "description": "plans without a test"}
        est = call("projects_behaviour_searches_create", slug, body=call.body("BehaviourSearchInRequest", {
            **seek, "estimate_only": True})).parsed  # fmt: skip
        bs = call("projects_behaviour_searches_create", slug, body=call.body("BehaviourSearchInRequest", {
            **seek, "max_tokens": est["tokens"] * 10})).parsed  # fmt: skip  (the server counts 1,000 a call)
        bs = _wait(lambda: (b := call("projects_behaviour_searches_retrieve", slug, bs["id"]).parsed)["state"] not in (
            "queued", "running") and b, "the behaviour search's end", timeout=90)  # fmt: skip
        assert bs["state"] == "done", bs["error"]
        call("projects_behaviour_searches_list", slug)
        call("projects_behaviour_searches_cancel_create", slug, bs["id"])
        call("projects_behaviour_searches_groups_partial_update", slug, bs["id"], 1,
             body=call.body("PatchedGroupNameInRequest", {"name": "gen"}), ok=(200, 404))  # fmt: skip
        call("projects_live_policy_update", slug, body=call.body("LivePolicyInRequest", {
            "connection": conn.id, "model": "gen-model", "judge_share": 1.0, "human_share": 0.0}))  # fmt: skip
        call("projects_judge_connections_destroy", slug, conn.id, ok=(204, 409))
    finally:
        llm.stop()

    # a release: built by the worker, downloaded as a zip
    rel = call("projects_releases_create", slug, body=call.body("ReleaseInRequest", {"title": "gen"})).parsed
    _wait(lambda: call("projects_releases_retrieve", slug, rel.number).parsed.status in ("done", "failed"),
          "the release")
    call("projects_releases_list", slug)
    zipped = call("projects_releases_download_retrieve", slug, rel.number).parsed
    assert isinstance(zipped, File)
    with zipfile.ZipFile(zipped.payload) as archive:
        assert any(n.endswith(".jsonl") for n in archive.namelist())
    call("projects_releases_retry_create", slug, rel.number, ok=(202, 400, 409))

    assert call.called == set(ops), f"operations never called: {sorted(set(ops) - call.called)}"
