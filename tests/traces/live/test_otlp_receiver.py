"""The OTLP/HTTP receiver (traces/live, issue 30) fed by the real OpenTelemetry Python SDK and its
OTLP/HTTP exporters (protobuf, and JSON) from a small multi-agent script with GenAI and
OpenInference attributes: the trace appears with its agents, steps and span tree; a resent batch
does not duplicate; a revoked key gets 401; a killed assembly loses nothing."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from traces.live.assembly import live_assemble_due, live_trace_assemble
from traces.live.keys import ingest_key_create, ingest_key_revoke
from traces.models import LiveSpan, LiveTrace, Step, Trace

pytestmark = pytest.mark.django_db(transaction=True)

EXPORTERS = {"protobuf": ProtobufExporter, "json": JsonExporter}


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


# (name, attributes, children): a planner hands to a coder who calls a tool; the reviewer
# (OpenInference attributes) approves
CREW = ("crew.kickoff", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "crew"}, [
    ("invoke_agent planner", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}, [
        ("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                         "gen_ai.agent.name": "planner",
                         "gen_ai.input.messages": _messages("user", "Write a snake game."),
                         "gen_ai.output.messages": _messages("assistant", "Plan: board, snake, score. Coder, go.")},
         []),
    ]),
    ("invoke_agent coder", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}, [
        ("execute_tool write_file", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "write_file",
                                     "gen_ai.tool.call.arguments": '{"path": "snake.py"}',
                                     "gen_ai.tool.call.result": "written"}, []),
    ]),
    ("reviewer", {"openinference.span.kind": "AGENT", "agent.name": "reviewer", "input.value": "Review snake.py",
                  "output.value": "Approved without running it."}, []),
])  # fmt: skip


def _emit(tracer, node) -> int:
    name, attributes, children = node
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        for child in children:
            _emit(tracer, child)
        return span.get_span_context().trace_id


def run_crew(provider: TracerProvider) -> str:
    """The crew's six spans through ``provider``; returns the trace id (hex)."""
    return format(_emit(provider.get_tracer("crewai.demo"), CREW), "032x")


def _provider(exporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "snake-crew"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def key(project, manager):
    return ingest_key_create(project=project, name="test exporter", by=manager)


@pytest.mark.parametrize("encoding", list(EXPORTERS))
def test_an_sdk_exporter_sends_a_crew_that_becomes_a_trace(live_server, project, key, settings, encoding):
    settings.MAST_LIVE_QUIET_SECONDS = 0
    exporter = EXPORTERS[encoding](endpoint=f"{live_server.url}/otlp/v1/traces",
                                   headers={"Authorization": f"Bearer {key[1]}"})  # fmt: skip
    provider = _provider(exporter)
    trace_hex = run_crew(provider)
    provider.shutdown()

    live = LiveTrace.objects.get(project=project, otel_trace_id=trace_hex)
    assert live.n_spans == 6 and live.root_ended and live.state == "open"
    assert live_assemble_due() == 1
    live.refresh_from_db()
    assert live.state == "assembled", live.error
    trace = live.trace
    assert set(trace.agents) >= {"planner", "coder", "reviewer"}
    steps = list(Step.objects.filter(trace=trace).order_by("index"))
    assert trace.mas_name == "CrewAI"  # from the instrumentation scope, as a file import reads it
    assert ("coder", "tool_call") in [(s.agent, s.kind) for s in steps]
    assert any(s.agent == "planner" and "Plan: board" in s.content for s in steps)
    assert any(s.agent == "reviewer" and "Approved without running it." in s.content for s in steps)
    by_index = {s.index: s for s in steps}
    tool = next(s for s in steps if s.kind == "tool_call")
    assert by_index[tool.parent_index].agent == "coder"  # the span tree: the call sits under its agent
    key[0].refresh_from_db()
    assert key[0].last_used_at is not None


def _post(url: str, body: bytes, key: str, content_type: str = "application/x-protobuf", **headers):
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": content_type, "Authorization": f"Bearer {key}", **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


class Capture:
    """An exporter that keeps what the SDK would send, as the protobuf request bytes."""

    def __init__(self):
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.encode, self.ok, self.spans = encode_spans, SpanExportResult.SUCCESS, []

    def export(self, spans):
        self.spans.extend(spans)
        return self.ok

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=None):
        return True

    def body(self) -> bytes:
        return self.encode(self.spans).SerializeToString()


def test_a_resent_batch_is_not_stored_twice_and_a_revoked_key_gets_401(live_server, project, key):
    capture = Capture()
    provider = _provider(capture)
    trace_hex = run_crew(provider)
    url = f"{live_server.url}/otlp/v1/traces"
    body = capture.body()
    for _ in range(2):  # the exporter retries after a lost answer: the same batch again
        status, answer, _ = _post(url, body, key[1])
        assert status == 200
        assert trace_service_pb2.ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 0
    assert LiveSpan.objects.filter(live__otel_trace_id=trace_hex).count() == 6
    assert LiveTrace.objects.get(otel_trace_id=trace_hex).n_spans == 6
    # gzip as the exporters send it by default
    status, _, _ = _post(url, gzip.compress(body), key[1], **{"Content-Encoding": "gzip"})
    assert status == 200 and LiveSpan.objects.count() == 6

    ingest_key_revoke(key=key[0])
    status, answer, _ = _post(url, body, key[1])
    assert status == 401 and b"ingest key" in answer
    status, _, _ = _post(url, body, "mast_ik_nothing")
    assert status == 401


def test_bad_requests_are_answered_as_the_specification_says(live_server, project, key, settings):
    url = f"{live_server.url}/otlp/v1/traces"
    status, answer, _ = _post(url, b"\xff\xfenot protobuf", key[1])
    assert status == 400
    status, answer, _ = _post(url, b"{not json", key[1], content_type="application/json")
    assert status == 400 and b"not JSON" in answer
    status, _, _ = _post(url, b"x", key[1], content_type="text/plain")
    assert status == 415
    # a span without a valid id is rejected and counted; the others are stored
    spans = [{"traceId": "0" * 32, "spanId": "1" * 16, "name": "bad"},
             {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "good", "endTimeUnixNano": "2"}]  # fmt: skip
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}
    status, answer, _ = _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")
    assert status == 200
    partial = json.loads(answer)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "traceId" in partial["errorMessage"]
    assert LiveSpan.objects.count() == 1
    settings.MAST_OTLP_MAX_BYTES = 100
    status, _, _ = _post(url, json.dumps(doc).encode() * 2, key[1], content_type="application/json")
    assert status == 413
    settings.MAST_OTLP_MAX_BYTES = 16 * 1024**2
    settings.MAST_OTLP_REQUESTS_PER_SECOND = 0
    status, _, headers = _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")
    assert status == 429 and headers.get("Retry-After") == "1"
    # the workers are behind: one trace waits to be assembled, the backlog allowed is none
    from django.core.cache import cache

    settings.MAST_OTLP_REQUESTS_PER_SECOND, settings.MAST_LIVE_MAX_BACKLOG, settings.MAST_LIVE_QUIET_SECONDS = 100, 0, 0
    cache.clear()
    status, _, headers = _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")
    assert status == 503 and headers.get("Retry-After") == "10"


def test_a_late_span_updates_an_unlabelled_trace_and_marks_a_labelled_one(live_server, project, key, manager):
    from tests.annotations.releases_factories import annotate, decisions, human_rater

    capture = Capture()
    provider = _provider(capture)
    trace_hex = run_crew(provider)
    url = f"{live_server.url}/otlp/v1/traces"
    assert _post(url, capture.body(), key[1])[0] == 200
    live = live_trace_assemble(live_id=LiveTrace.objects.get(otel_trace_id=trace_hex).pk)
    first = live.trace
    agent = [{"key": "gen_ai.agent.name", "value": {"stringValue": "late"}}]
    late = {"traceId": trace_hex, "spanId": "ee" * 8, "name": "late agent", "endTimeUnixNano": "9", "attributes": agent}
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": [late]}]}]}
    assert _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")[0] == 200
    live = live_trace_assemble(live_id=live.pk)
    assert live.trace_id != first.pk and not Trace.objects.filter(pk=first.pk).exists()  # replaced
    annotate(live.trace, human_rater(manager), project.taxonomy_version, decisions(project.taxonomy_version))
    late["spanId"] = "ef" * 8
    assert _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")[0] == 200
    labelled = live.trace_id
    live = live_trace_assemble(live_id=live.pk)
    assert live.trace_id == labelled and live.changed_after_labelling and live.n_spans == 8
    from django.test import Client

    browser = Client()
    browser.force_login(manager)
    page = browser.get(f"/p/{project.slug}/traces/{labelled}/").content.decode()
    assert 'data-testid="live-changed"' in page  # the trace says it changed after labelling


def test_a_killed_assembly_loses_nothing(live_server, project, key):
    """The import runs inside the live trace's transaction: an assembly that dies half-way (here:
    the database refuses the trace's rows) leaves the live trace open with every span, and the next
    sweep assembles it."""
    from django.db import connection

    capture = Capture()
    trace_hex = run_crew(_provider(capture))
    assert _post(f"{live_server.url}/otlp/v1/traces", capture.body(), key[1])[0] == 200
    live = LiveTrace.objects.get(otel_trace_id=trace_hex)
    with connection.cursor() as cur:
        cur.execute("CREATE OR REPLACE FUNCTION test_refuse() RETURNS trigger AS $$ BEGIN "
                    "RAISE EXCEPTION 'killed mid-assembly'; END $$ LANGUAGE plpgsql")  # fmt: skip
        cur.execute("CREATE TRIGGER test_refuse BEFORE INSERT ON traces_step "
                    "FOR EACH ROW EXECUTE FUNCTION test_refuse()")  # fmt: skip
    try:
        with pytest.raises(Exception, match="killed mid-assembly"):
            live_trace_assemble(live_id=live.pk)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER test_refuse ON traces_step")
    live.refresh_from_db()
    assert live.state == "open" and live.trace is None and live.spans.count() == 6
    assert not Trace.objects.filter(project=project).exists()
    assert live_trace_assemble(live_id=live.pk).state == "assembled"


def test_managers_create_and_revoke_keys_on_the_live_page(client, project, manager, annotator):
    from django.urls import reverse

    url = reverse("live", args=[project.slug])
    client.force_login(annotator)
    assert client.get(url).status_code in (403, 404)
    client.force_login(manager)
    page = client.post(url, {"op": "key", "name": "staging"}, follow=True).content.decode()
    plain = page.split("it is not shown again: ")[1].split("<")[0].strip()
    assert plain.startswith("mast_ik_")
    stored = project.ingest_keys.get()
    assert stored.key_hash != plain and plain not in stored.key_hash
    listing = client.get(url).content.decode()
    assert plain not in listing and f"mast_ik_{stored.prefix}" in listing
    client.post(url, {"op": "revoke", "id": stored.pk})
    stored.refresh_from_db()
    assert stored.revoked_at is not None


def test_the_protobuf_reading_equals_protobufs_own_json_mapping():
    """traces.live.otlp reads protobuf by hand (ten times faster than MessageToDict): on what the SDK
    sends (attributes of every kind, events, links, an error status) it gives the JSON mapping's
    document, ids in hex as OTLP/JSON writes them."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.trace import Link, Status, StatusCode

    from traces.live.otlp import _protobuf_dict

    capture = Capture()
    provider = _provider(capture)
    tracer = provider.get_tracer("crewai.demo", "1.2.3")
    with tracer.start_as_current_span("parent", attributes={"n": 3, "ok": True, "x": 1.5, "tags": ["a", "b"]}) as p:
        p.add_event("gen_ai.choice", {"index": 0, "message": '{"content": "hi"}'})
        p.set_status(Status(StatusCode.ERROR, "boom"))
        with tracer.start_as_current_span("child", links=[Link(p.get_span_context(), {"why": "retry"})]):
            pass
    body = capture.body()
    mine = _protobuf_dict(body)
    theirs = MessageToDict(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
    from opentelemetry.proto.trace.v1 import trace_pb2

    for rs in theirs["resourceSpans"]:  # the JSON mapping writes ids base64 and enums by name
        for span in rs["scopeSpans"][0]["spans"]:
            for item in [span, *span.get("links", [])]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in item:
                        item[name] = base64.b64decode(item[name]).hex()
            span["kind"] = trace_pb2.Span.SpanKind.Value(span["kind"])
            if span.get("status"):
                span["status"]["code"] = trace_pb2.Status.StatusCode.Value(span["status"]["code"])
            else:
                span.pop("status", None)
    assert mine == theirs



def test_two_identical_runs_become_one_trace_with_two_sources(live_server, project, key):
    """Two runs whose spans say the same (a deterministic crew) are one trace text: the second live
    trace is kept as another source of the first's trace, as the file importer merges them."""
    url = f"{live_server.url}/otlp/v1/traces"
    spans = [{"spanId": "cd" * 8, "name": "invoke_agent crew", "endTimeUnixNano": "2",
              "attributes": [{"key": "gen_ai.agent.name", "value": {"stringValue": "crew"}},
                             {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]  # fmt: skip
    lives = []
    for trace_hex in ("ab" * 16, "ef" * 16):
        scope = {"scope": {"name": "crewai"}, "spans": [{**spans[0], "traceId": trace_hex}]}
        doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [scope]}]}
        assert _post(url, json.dumps(doc).encode(), key[1], content_type="application/json")[0] == 200
        lives.append(live_trace_assemble(live_id=LiveTrace.objects.get(otel_trace_id=trace_hex).pk))
    assert [lv.state for lv in lives] == ["assembled", "assembled"], [lv.error for lv in lives]
    assert lives[0].trace_id == lives[1].trace_id
    assert Trace.objects.filter(project=project).count() == 1


def test_the_api_counts_what_the_receiver_took_and_flushes(live_server, project, key, manager, annotator, settings):
    settings.MAST_LIVE_QUIET_SECONDS = 0  # so the flush comes after the quiet period: a lag is counted
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    url = f"{live_server.url}/otlp/v1/traces"
    capture = Capture()
    run_crew(_provider(capture))
    for _ in range(2):
        assert _post(url, capture.body(), key[1])[0] == 200
    bad = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "1" * 16}]}]}]}
    assert _post(url, json.dumps(bad).encode(), key[1], content_type="application/json")[0] == 200
    assert _post(url, b"\\x00garbage", key[1])[0] == 400

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=manager).key}")
    data = api.get(f"/api/projects/{project.slug}/live/").json()
    hour = data["hours"][0]
    assert (hour["requests"], hour["refused_requests"]) == (3, 1)
    assert (hour["spans_accepted"], hour["spans_new"], hour["spans_rejected"]) == (12, 6, 1)
    assert any("traceId" in why for why in hour["reasons"]) and any(why.startswith("400") for why in hour["reasons"])
    assert data["open"] == 1 and data["traces"][0]["n_spans"] == 6
    assert api.post(f"/api/projects/{project.slug}/live/flush/").json() == {"assembled": 1, "failed": 0}
    data = api.get(f"/api/projects/{project.slug}/live/").json()
    assert data["assembled"] == 1 and data["hours"][0]["traces_assembled"] == 1 and data["lag_seconds"]["traces"] == 1

    created = api.post(f"/api/projects/{project.slug}/ingest-keys/", {"name": "ci"}, format="json").json()
    assert created["key"].startswith("mast_ik_")
    listed = api.get(f"/api/projects/{project.slug}/ingest-keys/").json()
    assert created["key"] not in json.dumps(listed) and {k["name"] for k in listed} == {"test exporter", "ci"}
    assert api.post(f"/api/projects/{project.slug}/ingest-keys/{created['id']}/revoke/").json()["revoked_at"]
    assert _post(url, capture.body(), created["key"])[0] == 401

    viewer = APIClient()
    viewer.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=annotator).key}")
    assert viewer.get(f"/api/projects/{project.slug}/live/").status_code in (403, 404)
    assert viewer.get(f"/api/projects/{project.slug}/ingest-keys/").status_code in (403, 404)


def test_a_worker_killed_mid_assembly_loses_nothing(live_server, project, key, settings):
    """A real Celery worker starts assembling (its import waits in the database: a trigger sleeps on
    the first step row), is killed with SIGKILL; PostgreSQL rolls its transaction back when the
    connection drops. A new worker's sweep assembles the trace: every span is there, one trace."""
    import os
    import time

    from django.db import connection

    from tests.conftest_paths import subprocess_database_url
    from tests.processes import WorkerProcess

    capture = Capture()
    trace_hex = run_crew(_provider(capture))
    assert _post(f"{live_server.url}/otlp/v1/traces", capture.body(), key[1])[0] == 200
    with connection.cursor() as cur:
        cur.execute("CREATE OR REPLACE FUNCTION test_stall() RETURNS trigger AS $$ BEGIN "
                    "PERFORM pg_sleep(60); RETURN NEW; END $$ LANGUAGE plpgsql")  # fmt: skip
        cur.execute("CREATE TRIGGER test_stall BEFORE INSERT ON traces_step "
                    "FOR EACH ROW EXECUTE FUNCTION test_stall()")  # fmt: skip
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "MAST_LIVE_QUIET_SECONDS": "0", "MAST_LIVE_SWEEP_SECONDS": "0.5"}  # fmt: skip
    worker = WorkerProcess(env)
    worker.purge()
    worker.start(concurrency=2, name="live-a")
    try:
        deadline = time.time() + 30
        stalled = False
        while time.time() < deadline and not stalled:
            with connection.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
                stalled = cur.fetchone()[0] > 0
            time.sleep(0.2)
        assert stalled, "the worker never reached the step rows"
        worker.kill()
    finally:
        worker.stop()
        with connection.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
            cur.execute("DROP TRIGGER test_stall ON traces_step")
    live = LiveTrace.objects.get(otel_trace_id=trace_hex)
    assert live.state == "open" and live.spans.count() == 6 and not Trace.objects.filter(project=project).exists()

    second = WorkerProcess(env)
    second.start(concurrency=2, name="live-b")
    try:
        deadline = time.time() + 60
        while time.time() < deadline and LiveTrace.objects.get(pk=live.pk).state == "open":
            time.sleep(0.3)
    finally:
        second.stop()
    live.refresh_from_db()
    assert live.state == "assembled" and live.trace is not None
    assert Trace.objects.filter(project=project).count() == 1 and live.spans.count() == 6
